package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// The third-party server: CopilotKit's aimock (npm @copilotkit/aimock, pinned in
// testdata/aimock/package-lock.json), an OpenAI-compatible mock this project did not
// write, with fault injection of its own, chosen per request by a header. `make test`
// installs it (make third-party-deps, with npm) and these tests skip, saying so, where it
// could not.
var (
	aimockDir      = filepath.Join("testdata", "aimock")
	aimockFixtures = filepath.Join(aimockDir, "fixtures")
	aimockCLI      = filepath.Join(aimockDir, "node_modules", "@copilotkit", "aimock", "dist", "cli.js")
)

// aimock returns node and aimock's CLI script (absolute), or skips the test.
func aimock(t *testing.T) (node, cli string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a third-party server")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node here: the third-party server tests need Node.js (make third-party-deps)")
	}
	// aimock's package.json asks for node >= 20.15 (engines): an older one is told, not failed.
	out, err := exec.Command(node, "-e", `const [a,b]=process.versions.node.split(".").map(Number);process.stdout.write(String(a>20||(a==20&&b>=15)))`).Output()
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skipf("node at %s is older than aimock's 20.15 (%v): the third-party server tests skip", node, err)
	}
	cli, err = filepath.Abs(aimockCLI)
	require.NoError(t, err)
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("aimock is not installed (%v): make third-party-deps installs it with npm", err)
	}
	return node, cli
}

// startAimock runs aimock on a free loopback port with the catch-all fixture (and args)
// and returns its URL and process; the test's cleanup kills it.
func startAimock(t *testing.T, args ...string) (string, *os.Process) {
	t.Helper()
	node, cli := aimock(t)
	fixtures, err := filepath.Abs(aimockFixtures)
	require.NoError(t, err)
	port := testutil.FreePort(t)
	cmd := exec.Command(node, append([]string{cli, "-p", fmt.Sprint(port), "-f", fixtures, "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	testutil.WaitHealthy(t, url+"/health", time.Minute)
	return url, cmd.Process
}

// writeScenario writes yaml to a file of the test's and returns its path.
func writeScenario(t *testing.T, name, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(p, []byte(yaml), 0o644))
	return p
}

// TestThirdPartyClassification: one workload per kind of answer aimock can give (its
// chaos headers), each classified as the bytes on the wire say: a 500 is http_error, a 429
// rejected, a 200 whose body is not JSON invalid, a connection destroyed before any byte
// transport_error, an answer held past the first-token deadline deadline_exceeded (a
// silent drop), and a plain streamed answer ok.
func TestThirdPartyClassification(t *testing.T) {
	url, _ := startAimock(t)
	w := func(name, header string) string {
		h := ""
		if header != "" {
			h = ", headers: {" + header + "}"
		}
		return fmt.Sprintf("  - {name: %s, type: open_loop, max_tokens: 8, prompt_tokens: 16, pacer: {type: constant, rate: 4}%s}\n", name, h)
	}
	file := writeScenario(t, "aimock", `name: third-party-aimock
seed: 1
duration: 3s
target: {url: `+url+`, model: gpt-4o}
workloads:
`+w("plain", "")+w("drop", `x-aimock-chaos-drop: "1"`)+w("malformed", `x-aimock-chaos-malformed: "1"`)+
		w("ratelimit", `x-aimock-chaos-ratelimit: "1"`)+w("disconnect", `x-aimock-chaos-disconnect: "1"`)+
		w("slow", `x-aimock-chaos-latency: "3000"`)+`deadlines: {connect: 2s, first_token: 1s, stall: 1s, total: 2s}
drain: {timeout: 10s}
assertions: [no_silent_drops, valid_responses, explained_errors]
`)
	r := runHarness(t, file)
	want := map[string]ledger.Outcome{
		"plain": ledger.OutcomeOK, "drop": ledger.OutcomeHTTPError, "malformed": ledger.OutcomeInvalid,
		"ratelimit": ledger.OutcomeRejected, "disconnect": ledger.OutcomeTransportError, "slow": ledger.OutcomeDeadlineExceeded,
	}
	for name, outcome := range want {
		wr, ok := r.res.ByWorkload[name]
		require.True(t, ok, "workload %s in results\n%s", name, r.diagnostics())
		require.Positive(t, wr.Requests, name)
		assert.Equal(t, map[ledger.Outcome]int{outcome: wr.Requests}, nonZero(wr.Outcomes), "workload %s", name)
	}
	assert.Equal(t, r.res.ByWorkload["slow"].Requests, r.res.SilentDrops, "the held answers are the silent drops")
	assert.Equal(t, reports.VerdictFail, r.res.Verdict)
	assert.Equal(t, []string{"explained_errors (fail)", "no_silent_drops (fail)", "valid_responses (fail)"}, failedAssertions(r.res))
	assert.Equal(t, 1, r.code, "exit code of a FAIL")
	// Only the 429s are explained (load shedding); nothing declared explains the rest.
	assert.Equal(t, r.res.ByWorkload["ratelimit"].Requests, r.res.Causes["refused"], "causes %v", r.res.Causes)
}

// TestThirdPartyStall: aimock started with 1.5 s between SSE chunks (its --latency, which
// also holds the head): each answer's role-only chunk arrives with the head and carries no
// token, and the next one comes 1.5 s later, past a 1 s stall deadline. Every request is
// a silent drop, stalled before its first token.
func TestThirdPartyStall(t *testing.T) {
	url, _ := startAimock(t, "--latency", "1500")
	file := writeScenario(t, "aimock-stall", `name: third-party-aimock-stall
seed: 1
duration: 2s
target: {url: `+url+`, model: gpt-4o}
workloads:
  - {name: plain, type: open_loop, max_tokens: 8, prompt_tokens: 16, pacer: {type: constant, rate: 2}}
deadlines: {connect: 2s, first_token: 3s, stall: 1s, total: 8s}
drain: {timeout: 10s}
assertions: [no_silent_drops, valid_responses, explained_errors]
`)
	r := runHarness(t, file)
	require.Positive(t, r.res.Requests, r.diagnostics())
	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeStalled: r.res.Requests}, nonZero(r.res.Outcomes))
	assert.Equal(t, r.res.Requests, r.res.SilentDrops)
	require.NotEmpty(t, r.res.Drops)
	for _, d := range r.res.Drops {
		assert.Equal(t, ledger.PhaseBeforeFirstToken, d.Phase, d.RequestID)
	}
	assert.Equal(t, reports.VerdictFail, r.res.Verdict)
}

// TestThirdPartyBurstNotQueued: a queue_saturation burst against aimock, which answers
// every request at once (100 ms before each chunk, no capacity limit), is not proved: no
// refusal, no gauge (aimock has no metrics), and no stream of it was served to its end
// while another still waited for its first token. The run is invalid, not passed on
// "requests in flight", which any server shows.
func TestThirdPartyBurstNotQueued(t *testing.T) {
	url, _ := startAimock(t, "--latency", "100")
	file := writeScenario(t, "aimock-burst", `name: third-party-aimock-burst
seed: 1
duration: 3s
target: {url: `+url+`, model: gpt-4o}
workloads:
  - {name: plain, type: open_loop, stream: true, max_tokens: 8, prompt_tokens: 16, pacer: {type: constant, rate: 2}}
faults:
  - {name: flood, type: queue_saturation, target: plain, at: 1s, for: 2s, params: {requests: 20}}
deadlines: {connect: 4s, first_token: 4s, stall: 4s, total: 20s}
drain: {timeout: 20s}
assertions: [no_silent_drops]
`)
	r := runHarness(t, file)
	assert.Equal(t, 3, r.code, "exit code of an unproved fault\n%s", r.diagnostics())
	assert.Contains(t, r.stdout+r.stderr, "no stream was served to its end while another sent with it waited for its first token")
	evs, _, err := ledger.ReadFile(filepath.Join(r.out, "events.jsonl"))
	require.NoError(t, err)
	burst := 0
	for _, e := range evs {
		if e.Type == ledger.EventDone && strings.Contains(e.RequestID, "-burst") {
			burst++
			assert.Equal(t, ledger.OutcomeOK, e.Outcome, e.RequestID)
			assert.Greater(t, e.Chunks, 1, "%s: a stream of several chunks", e.RequestID)
		}
	}
	assert.Equal(t, 20, burst, "the whole burst was answered")
}

// TestThirdPartyKilled: the same server launched by the scenario (target.launch, as the
// packs launch vLLM) and SIGKILLed by a declared process_kill passes, every error
// explained by the fault and the outage on record; killed from outside, with nothing
// declared, the run fails and says the target went down.
func TestThirdPartyKilled(t *testing.T) {
	t.Run("declared fault", func(t *testing.T) {
		node, cli := aimock(t)
		fixtures, err := filepath.Abs(aimockFixtures)
		require.NoError(t, err)
		port := testutil.FreePort(t)
		file := writeScenario(t, "aimock-kill", fmt.Sprintf(`name: third-party-aimock-kill
seed: 1
duration: 6s
target:
  url: http://127.0.0.1:%[1]d
  model: gpt-4o
  launch:
    - name: server
      role: colocated
      launcher: %[2]q
      command: [%[3]q, -p, "%[1]d", -f, %[4]q, --log-level, warn]
      health_url: http://127.0.0.1:%[1]d/health
      start_timeout: 60s
workloads:
  - {name: plain, type: open_loop, max_tokens: 8, prompt_tokens: 16, pacer: {type: constant, rate: 8}}
faults:
  - {name: kill-server, type: process_kill, target: server, at: 2s, for: 2s}
deadlines: {connect: 4s, first_token: 2s, stall: 2s, total: 4s}
drain: {timeout: 10s}
assertions: [no_silent_drops, valid_responses, explained_errors]
`, port, node, cli, fixtures))
		r := runHarness(t, file)
		require.Equal(t, reports.VerdictPass, r.res.Verdict, r.diagnostics())
		assert.Positive(t, r.res.Outcomes[ledger.OutcomeOK])
		errs := r.res.Requests - r.res.Outcomes[ledger.OutcomeOK]
		assert.Positive(t, errs, "the kill cut requests")
		assert.Equal(t, errs, r.res.Causes["fault:kill-server"], "causes %v", r.res.Causes)
		require.NotEmpty(t, r.res.Liveness, "the outage is on record")
	})
	t.Run("undeclared death", func(t *testing.T) {
		url, proc := startAimock(t)
		file := writeScenario(t, "aimock-dies", `name: third-party-aimock-dies
seed: 1
duration: 5s
target: {url: `+url+`, model: gpt-4o}
workloads:
  - {name: plain, type: open_loop, max_tokens: 8, prompt_tokens: 16, pacer: {type: constant, rate: 8}}
deadlines: {connect: 4s, first_token: 2s, stall: 2s, total: 4s}
drain: {timeout: 10s}
assertions: [no_silent_drops, valid_responses, explained_errors]
`)
		kill := time.AfterFunc(2*time.Second, func() { _ = proc.Signal(syscall.SIGKILL) })
		defer kill.Stop()
		r := runHarness(t, file)
		require.Equal(t, reports.VerdictFail, r.res.Verdict, r.diagnostics())
		assert.Equal(t, 1, r.code)
		assert.Contains(t, failedAssertions(r.res), "explained_errors (fail)")
		assert.Positive(t, r.res.Causes["unexplained"], "causes %v", r.res.Causes)
		assert.Contains(t, r.stdout+r.stderr+strings.Join(r.res.Notes, "\n"), "did not come back")
	})
}

// nonZero is m without its zero counts.
func nonZero(m map[ledger.Outcome]int) map[ledger.Outcome]int {
	out := map[ledger.Outcome]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
