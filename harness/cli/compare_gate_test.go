package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// gateScenario is a short simulated run of the reference server: agents and open-loop.
const gateScenario = `name: gate
seed: SEED
duration: 20s
reference:
  backend: simtime
  profile: llama3-8b-h100
workloads:
  - name: agents
    type: agents
    agents: 8
    turns: 4
    max_tokens: 16
    think_time: 1s
  - name: open
    type: open_loop
    max_tokens: 16
    pacer: {type: constant, rate: 10}
    max_in_flight: 32
deadlines: {connect: 5s, first_token: 30s, stall: 20s, total: 60s}
drain: {timeout: 30s}
assertions: [no_silent_drops, valid_responses]
`

// simRuns makes simulated runs of gateScenario with the given seeds (real ledgers of
// the reference server on a virtual clock).
func simRuns(t *testing.T, dir string, seeds ...string) []string {
	t.Helper()
	var outs []string
	for _, seed := range seeds {
		sc := writeFile(t, dir, "gate-"+seed+".yaml", strings.Replace(gateScenario, "SEED", seed, 1))
		out := filepath.Join(dir, "run-"+seed)
		code, stdout, stderr := execute(t, []string{"run", sc, "--sim", "--out", out, "-q"})
		require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
		outs = append(outs, out)
	}
	return outs
}

// copyRun copies a run's output directory (its files, not sub-directories).
func copyRun(t *testing.T, from, to string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o755))
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), data, 0o644))
	}
	return to
}

// editLedger rewrites a run's events.jsonl through fn, line by line, and appends more.
func editLedger(t *testing.T, dir string, fn func(*ledger.Event), more ...ledger.Event) {
	t.Helper()
	path := filepath.Join(dir, ledger.EventsFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e ledger.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e))
		if fn != nil {
			fn(&e)
		}
		b, err := json.Marshal(e)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	for _, e := range more {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644))
}

// TestCompareGateExitCodes: simulated runs of the reference server, compared by the real
// command: two seeds of the same server pass (0); the same NEW with contention samples
// saying its machine was busy is inconclusive (3), naming NEW and by how much, and
// --ignore-contention judges it anyway; a run whose provenance differs (another backend,
// a real run against a simulated one) is refused (2) unless --force; three BASE runs pool.
func TestCompareGateExitCodes(t *testing.T) {
	dir := t.TempDir()
	runs := simRuns(t, dir, "11", "12", "13", "14")
	base, nw := runs[0], runs[1]

	code, stdout, stderr := execute(t, []string{"compare", base, nw, "--out", filepath.Join(dir, "cmp-same")})
	require.Equal(t, ExitNoRegression, code, "%s\n%s", stdout, stderr)

	busy := copyRun(t, nw, filepath.Join(dir, "busy"))
	var start time.Time
	editLedger(t, busy, func(e *ledger.Event) {
		if e.Type == ledger.EventRunStart {
			start = e.Time
		}
	})
	var samples []ledger.Event
	for i := range 10 {
		samples = append(samples, ledger.Event{Time: start.Add(time.Duration(2*i+2) * time.Second), Type: ledger.EventSample,
			Source: ledger.ContentionSource, Metrics: map[string]float64{ledger.ContentionCPUPressure: 0.9, ledger.ContentionTickLag: 0.004}})
	}
	editLedger(t, busy, nil, samples...)
	out := filepath.Join(dir, "cmp-busy")
	code, stdout, stderr = execute(t, []string{"compare", base, busy, "--out", out})
	require.Equal(t, ExitInconclusive, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "INCONCLUSIVE: NEW was contended: CPU pressure (mean share of time a task waited for a CPU) 90% (bound 40%)")
	assert.Contains(t, stdout, "NEW = "+busy)
	assert.NotContains(t, stdout, "REGRESSION")
	assert.Contains(t, readFile(t, filepath.Join(out, reports.CompareMarkdownFile)), "**Inconclusive:**")
	code, _, _ = execute(t, []string{"compare", base, busy, "--max-cpu-pressure", "95%", "--out", out})
	assert.Equal(t, ExitNoRegression, code, "under a looser bound")
	code, stdout, _ = execute(t, []string{"compare", base, busy, "--ignore-contention", "--out", out})
	assert.Equal(t, ExitNoRegression, code)
	assert.Contains(t, stdout, "--ignore-contention")

	// Under the pressure bound, but every harness thread waited 300 µs for a CPU per
	// wake-up: contended too; --max-run-delay loosens that bound alone.
	waited := copyRun(t, nw, filepath.Join(dir, "waited"))
	samples = samples[:0]
	for i := range 10 {
		samples = append(samples, ledger.Event{Time: start.Add(time.Duration(2*i+2) * time.Second), Type: ledger.EventSample,
			Source: ledger.ContentionSource, Metrics: map[string]float64{ledger.ContentionCPUPressure: 0.1, ledger.ContentionRunDelay: 0.0003}})
	}
	editLedger(t, waited, nil, samples...)
	code, stdout, stderr = execute(t, []string{"compare", base, waited, "--out", out})
	require.Equal(t, ExitInconclusive, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "NEW was contended: harness threads' wait for a CPU (mean per wake-up) 300µs (bound 100µs)")
	code, _, _ = execute(t, []string{"compare", base, waited, "--max-run-delay", "1ms", "--out", out})
	assert.Equal(t, ExitNoRegression, code, "under a looser bound")
	for _, flag := range []string{"--max-run-delay", "--max-tick-lag", "--max-send-lag"} {
		code, _, stderr = execute(t, []string{"compare", base, waited, flag, "0s", "--out", out})
		assert.Equal(t, ExitUsage, code, flag)
		assert.Contains(t, stderr, flag+": must be positive", flag)
	}

	other := copyRun(t, nw, filepath.Join(dir, "other-backend"))
	data := readFile(t, filepath.Join(other, ResolvedFile))
	require.Contains(t, data, `"backend": "simtime"`)
	writeFile(t, other, ResolvedFile, strings.Replace(data, `"backend": "simtime"`, `"backend": "paced"`, 1))
	out = filepath.Join(dir, "cmp-backend")
	code, stdout, stderr = execute(t, []string{"compare", base, other, "--out", out})
	require.Equal(t, ExitNotComparable, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stderr, `not comparable: BASE vs NEW: backend "simtime" vs "paced"`)
	assert.NoFileExists(t, filepath.Join(out, reports.CompareMarkdownFile))
	code, stdout, stderr = execute(t, []string{"compare", base, other, "--force", "--out", out})
	require.Equal(t, ExitNoRegression, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "forced: the runs' provenance differs")
	assert.Contains(t, readFile(t, filepath.Join(out, reports.CompareMarkdownFile)), `**Forced:** the runs' provenance differs (backend "simtime" vs "paced")`)

	real := copyRun(t, nw, filepath.Join(dir, "real"))
	editLedger(t, real, func(e *ledger.Event) { e.Mode = "" })
	code, _, stderr = execute(t, []string{"compare", base, real, "--out", filepath.Join(dir, "cmp-real")})
	require.Equal(t, ExitNotComparable, code)
	assert.Contains(t, stderr, "sim run vs real run")

	out = filepath.Join(dir, "cmp-pooled")
	code, stdout, stderr = execute(t, []string{"compare", runs[0], runs[2], runs[3], nw, "--out", out})
	require.Equal(t, ExitNoRegression, code, "%s\n%s", stdout, stderr)
	md := readFile(t, filepath.Join(out, reports.CompareMarkdownFile))
	assert.Contains(t, md, "BASE pools 3 runs")
	assert.Contains(t, md, "(runs ")
}
