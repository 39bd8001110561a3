package cli

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// Secrets of TestHeaderValuesNeverWritten: one from the environment, one written in the
// file, one from --header.
const (
	envSecret  = "sk-env-secret-7f3a9c"
	fileSecret = "route-file-secret-91b2"
	flagSecret = "flag-secret-c4d1e8"
)

// TestHeaderValuesNeverWritten runs the real harness against a server that checks every
// request carries target.headers (with ${VAR} expanded), the workload's headers and the
// --header flag, with some requests never answered so forensics bundles are written
// too; then no file the run wrote, and nothing run, plan or validate printed, holds any
// of the values.
func TestHeaderValuesNeverWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness for a few seconds")
	}
	t.Setenv("PDSOAK_TEST_KEY", envSecret)
	var seen, wrong atomic.Int64
	// srv's cleanup is registered first so that it runs last, after inner's has released
	// the hanging handlers.
	var inner *httptest.Server
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		// target.headers go with every request to the target, the auxiliary GETs (target
		// info, /debug/requests) included; the workload's only with its own requests.
		if r.Header.Get("Authorization") != "Bearer "+envSecret || r.Header.Get("X-Flag") != flagSecret {
			wrong.Add(1)
		}
		if r.Method == http.MethodPost && (r.Header.Get("X-Route") != fileSecret || r.Header.Get("Accept-Encoding") != "identity") {
			wrong.Add(1)
		}
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	inner = fakeOpenAI(t, 4, nil) // every 4th request hangs: silent drops, forensics
	sc := strings.Replace(readFile(t, e2eScenario(t, true)), "    max_tokens: 3\n",
		"    max_tokens: 3\n    headers: {X-Route: "+fileSecret+"}\n", 1)
	sc = strings.Replace(sc, "duration: 2s\n", "duration: 2s\ntarget:\n  headers:\n    Authorization: \"Bearer ${PDSOAK_TEST_KEY}\"\n", 1)
	file := writeFile(t, t.TempDir(), "secret.yaml", sc)
	flag := "X-Flag: " + flagSecret

	var printed strings.Builder
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := execute(t, []string{"run", file, "--target", srv.URL, "--header", flag, "--out", out}, WithRunner(harnessRun))
	printed.WriteString(stdout + stderr)
	require.Equal(t, ExitFail, code, "the hanging requests are silent drops\n%s\n%s", stdout, stderr)
	for _, args := range [][]string{
		{"plan", file, "--target", srv.URL, "--header", flag},
		{"validate", file, "--target", srv.URL, "--header", flag},
	} {
		code, stdout, stderr := execute(t, args)
		require.Equal(t, ExitPass, code, "%v\n%s\n%s", args, stdout, stderr)
		printed.WriteString(stdout + stderr)
	}
	require.NotZero(t, seen.Load(), "the server saw requests")
	assert.Zero(t, wrong.Load(), "requests without the configured headers")

	files, bundles := 0, 0
	require.NoError(t, filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		if strings.Contains(path, "forensics") {
			bundles++
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, s := range []string{envSecret, fileSecret, flagSecret} {
			assert.NotContains(t, string(data), s, "%s holds a header value", path)
		}
		return nil
	}))
	t.Logf("%d output files checked, %d of them in forensics bundles", files, bundles)
	assert.NotZero(t, bundles, "the silent drops wrote forensics bundles, and they were checked")
	assert.FileExists(t, filepath.Join(out, "events.jsonl"))
	for _, s := range []string{envSecret, fileSecret, flagSecret} {
		assert.NotContains(t, printed.String(), s, "printed output holds a header value")
	}
	assert.Contains(t, printed.String(), "PDSOAK_TEST_KEY=<redacted>", "plan names the variable, not its value")
}

// A malformed --header is a usage error on every command that takes it, naming the flag.
func TestHeaderFlagUsage(t *testing.T) {
	file := writeFile(t, t.TempDir(), "h.yaml", "name: h\nworkloads:\n  - type: burst\n    count: 1\n")
	for _, cmd := range []string{"validate", "plan", "run", "explore"} {
		code, stdout, stderr := execute(t, []string{cmd, file, "--header", "no-colon-here"})
		assert.Equal(t, ExitUsage, code, "%s\n%s\n%s", cmd, stdout, stderr)
		assert.Contains(t, stderr, "--header wants 'Name: value'", cmd)
	}
	code, stdout, stderr := execute(t, []string{"validate", file, "--header", "Host: evil"})
	assert.Equal(t, ExitUsage, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stderr, "Host is set by the client itself")
}

// TestHeaderFlagReplacesAnyCase: --header replaces the file's header whatever its case.
// It added a second key beside it, and which of the two went out was left to chance
// (now refused as given twice).
func TestHeaderFlagReplacesAnyCase(t *testing.T) {
	file := writeFile(t, t.TempDir(), "h.yaml", "name: h\ntarget:\n  url: http://127.0.0.1:9\n  headers:\n    Authorization: Bearer old\nworkloads:\n  - type: burst\n    count: 1\n")
	code, stdout, stderr := execute(t, []string{"validate", file, "--header", "authorization: Bearer new"})
	assert.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
	sc := &scenarios.Scenario{Target: scenarios.Target{Headers: scenarios.Headers{"Authorization": "Bearer old", "X-Keep": "1"}}}
	require.NoError(t, headerFlag{"authorization: Bearer new"}.apply(sc))
	assert.Equal(t, scenarios.Headers{"authorization": "Bearer new", "X-Keep": "1"}, sc.Target.Headers)
}
