package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// fakepd builds testdata/fakepd, a stand-in for pdserver that answers every role.
func fakepd(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pdsoak-fakepd-")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "fakepd")
		if out, err := exec.Command("go", "build", "-o", fakeBin, "./testdata/fakepd").CombinedOutput(); err != nil {
			fakeErr = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, fakeErr)
	return fakeBin
}

func parseScenario(t *testing.T, yaml string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(yaml))
	require.NoError(t, err)
	return sc
}

// embeddedYAML's work is fixed by counts (3 agents, 2 turns) in a window far longer
// than the work (the run ends when the agents are done), with bounds a loaded machine
// keeps: every request is expected to succeed.
const embeddedYAML = `
name: embedded
seed: 2
duration: 2m
reference:
  prefill: 2
  decode: 1
workloads:
  - name: agents
    type: agents
    agents: 3
    turns: 2
deadlines: {connect: 30s, first_token: 30s, stall: 30s, total: 1m}
drain: {timeout: 1m, leak_timeout: 30s}
self_check: {max_lag: 30s}
`

// With no target.url the harness starts the reference topology through the launcher
// (here a fake pdserver), sends load to the router, scrapes every worker's metrics,
// keeps the processes' logs in OutDir/logs and stops everything at the end.
func TestEmbeddedTopology(t *testing.T) {
	bin := fakepd(t)
	sc := parseScenario(t, embeddedYAML)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	assert.Equal(t, 6, outcomes[ledger.OutcomeOK], "outcomes %v", outcomes)
	lc := eventsOf(evs, ledger.EventLeakCheck)
	require.Len(t, lc, 1)
	require.NotNil(t, lc[0].Passed)
	assert.True(t, *lc[0].Passed, "leak check: %+v", lc[0])
	assert.Contains(t, lc[0].Detail, "3 endpoints", "the leak check covers the 3 workers")
	for _, name := range []string{"router.log", "prefill-0.log", "prefill-1.log", "decode-0.log"} {
		b, err := os.ReadFile(filepath.Join(dir, "logs", name))
		require.NoError(t, err)
		assert.Contains(t, string(b), "listening", name)
	}
}

const colocatedYAML = `
name: colocated
duration: 2m
reference:
  prefill: 0
  decode: 0
workloads:
  - {name: b, type: burst, count: 4}
deadlines: {connect: 30s, total: 1m}
self_check: {max_lag: 30s}
`

func TestEmbeddedColocated(t *testing.T) {
	bin := fakepd(t)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), parseScenario(t, colocatedYAML), Options{OutDir: dir, PDServerCommand: []string{bin}}))
	outcomes := checkOneTerminal(t, readLedger(t, dir))
	assert.Equal(t, 4, outcomes[ledger.OutcomeOK], "outcomes %v", outcomes)
	b, err := os.ReadFile(filepath.Join(dir, "logs", "colocated.log"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "listening")
}

func TestEmbeddedStartFailureIsInfrastructure(t *testing.T) {
	dir := t.TempDir()
	err := Run(context.Background(), parseScenario(t, embeddedYAML), Options{OutDir: dir, PDServerCommand: []string{"/nonexistent/pdserver"}})
	require.ErrorIs(t, err, ErrInfrastructure)
}

// target.launch: the harness starts and supervises external processes (as it would
// SGLang on a GPU runner), and process faults apply to them by name.
func TestLaunchedTargetWithProcessFaults(t *testing.T) {
	bin := fakepd(t)
	port := freePort(t)
	yaml := fmt.Sprintf(`
name: launched
duration: 8s
target:
  url: http://127.0.0.1:%[1]d
  metrics_url: http://127.0.0.1:%[1]d/metrics
  launch:
    - name: server
      role: colocated
      command: [%[2]q, colocated, --port, "%[1]d"]
      health_url: http://127.0.0.1:%[1]d/health
      start_timeout: 20s
workloads:
  - {name: ol, type: open_loop, pacer: {type: constant, rate: 20}}
faults:
  - {name: bounce, type: process_restart, target: server, at: 1s}
  - {name: freeze, type: process_pause, target: server, at: 4s, for: 1s}
deadlines: {connect: 2s, first_token: 3s, stall: 2s, total: 5s}
drain: {timeout: 30s, leak_timeout: 15s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops]
`, port, bin)
	sc := parseScenario(t, yaml)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	assert.NotZero(t, outcomes[ledger.OutcomeOK], "outcomes %v", outcomes)
	verified := eventsOf(evs, ledger.EventFaultVerified)
	require.Len(t, verified, 2)
	for _, ev := range verified {
		require.NotNil(t, ev.Passed)
		assert.True(t, *ev.Passed, "fault not verified: %+v", ev)
	}
	b, err := os.ReadFile(filepath.Join(dir, "logs", "server.log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(b), "listening"), "server.log should show two starts: %q", b)
}

// Ctrl-C with the embedded topology: Run returns promptly, the ledger is complete and
// every process is stopped.
func TestEmbeddedCancel(t *testing.T) {
	bin := fakepd(t)
	sc := parseScenario(t, strings.Replace(embeddedYAML, "duration: 2m", "duration: 5m", 1))
	sc.Workloads[0].Turns = 0 // until the window ends
	sc.Workloads[0].ThinkTime = scenarios.Duration(10 * time.Millisecond)
	// Interrupt once requests are flowing (an event, not a timer a loaded machine can
	// fire while the topology is still starting).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onEvent := func(ev ledger.Event) {
		if ev.Type == ledger.EventDone {
			cancel()
		}
	}
	dir := t.TempDir()
	require.NoError(t, Run(ctx, sc, Options{OutDir: dir, PDServerCommand: []string{bin}, OnEvent: onEvent}))
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	assert.Len(t, eventsOf(evs, ledger.EventRunEnd), 1, "run_end")
	// The topology is gone: its router no longer answers.
	routers := 0
	for _, ev := range eventsOf(evs, ledger.EventLog) {
		if ev.URL != "" {
			routers++
			resp, err := http.Get(ev.URL + "/health")
			if err == nil {
				resp.Body.Close()
			}
			assert.Error(t, err, "router %s still answers after the run", ev.URL)
		}
	}
	assert.Equal(t, 1, routers, "the ledger names the router")
}

// A launched process with no health_url is still watched: its process state is its
// liveness (processURL). One that exits mid-run with no fault declared fails the run and
// says it did not come back, as one with a /health would.
func TestLaunchedProcessWithoutHealthURLSeenDead(t *testing.T) {
	bin := fakepd(t)
	port := freePort(t)
	yaml := fmt.Sprintf(`
name: launched-sidecar
duration: 6s
target:
  url: http://127.0.0.1:%[1]d
  launch:
    - name: sidecar
      role: decode
      command: [/bin/sh, -c, "sleep 3"]
    - name: server
      role: colocated
      command: [%[2]q, colocated, --port, "%[1]d"]
      health_url: http://127.0.0.1:%[1]d/health
      start_timeout: 20s
workloads:
  - {name: ol, type: open_loop, pacer: {type: constant, rate: 10}}
deadlines: {connect: 2s, first_token: 3s, stall: 2s, total: 5s}
drain: {timeout: 30s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops]
`, port, bin)
	sc := parseScenario(t, yaml)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs := readLedger(t, dir)
	var down []ledger.Event
	for _, ev := range eventsOf(evs, ledger.EventTargetDown) {
		if ev.Source == "sidecar" {
			down = append(down, ev)
		}
	}
	require.NotEmpty(t, down, "the sidecar's exit is on record")
	assert.Equal(t, "process://sidecar", down[0].URL)
	res := reports.Compute(evs, judge.ReportConfig(sc))
	assert.Equal(t, reports.VerdictFail, res.Verdict)
	assert.Contains(t, strings.Join(res.Notes, "\n")+fmt.Sprint(res.Liveness), "did not come back")
}

// TestLaunchedServerOutsideTheGroupIsNotProvedKilled: the supervisor signals the launched
// command's process group, but a server can run outside it (docker run's container, a
// launcher that calls setsid). Here `setsid -w` forks the server into a session of its own
// and waits: SIGKILL to the group kills setsid while the server keeps answering at its
// health_url. The kill is then not proved and the run fails as unverified; /proc alone
// (setsid's pid gone) "proved" it.
func TestLaunchedServerOutsideTheGroupIsNotProvedKilled(t *testing.T) {
	bin := fakepd(t)
	port := freePort(t)
	t.Cleanup(func() { killServing(t, bin, port) })
	yaml := fmt.Sprintf(`
name: outside-the-group
duration: 5s
target:
  url: http://127.0.0.1:%[1]d
  launch:
    - name: server
      role: colocated
      command: [setsid, -w, %[2]q, colocated, --port, "%[1]d"]
      health_url: http://127.0.0.1:%[1]d/health
      start_timeout: 20s
workloads:
  - {name: ol, type: open_loop, pacer: {type: constant, rate: 10}}
faults:
  - {name: crash, type: process_kill, target: server, at: 1s, for: 2s, params: {restart: false}}
deadlines: {connect: 2s, first_token: 3s, stall: 2s, total: 5s}
drain: {timeout: 10s, leak_timeout: 5s}
self_check: {max_lag: 30s}
assertions: [no_silent_drops]
`, port, bin)
	dir := t.TempDir()
	err := Run(context.Background(), parseScenario(t, yaml), Options{OutDir: dir})
	require.ErrorIs(t, err, chaos.ErrNotVerified)
	assert.Contains(t, err.Error(), fmt.Sprintf("http://127.0.0.1:%d still answers", port))
	verified := eventsOf(readLedger(t, dir), ledger.EventFaultVerified)
	require.Len(t, verified, 1)
	require.NotNil(t, verified[0].Passed)
	assert.False(t, *verified[0].Passed, "a kill that missed the server was proved: %+v", verified[0])
}

// killServing SIGKILLs the processes running bin with --port port: the server the
// harness's supervisor could not reach.
func killServing(t *testing.T, bin string, port int) {
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	want := bin + "\x00colocated\x00--port\x00" + strconv.Itoa(port) + "\x00"
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(b), want) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
