package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pdsoak/ledger"
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
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeBin
}

func parseScenario(t *testing.T, yaml string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

const embeddedYAML = `
name: embedded
seed: 2
duration: 1s
reference:
  prefill: 2
  decode: 1
workloads:
  - name: agents
    type: agents
    agents: 3
    turns: 2
deadlines: {connect: 2s, first_token: 5s, stall: 3s, total: 10s}
drain: {timeout: 10s, leak_timeout: 3s}
self_check: {max_lag: 5s}
`

// With no target.url the harness starts the reference topology through the launcher
// (here a fake pdserver), sends load to the router, scrapes every worker's metrics,
// keeps the processes' logs in OutDir/logs and stops everything at the end.
func TestEmbeddedTopology(t *testing.T) {
	bin := fakepd(t)
	sc := parseScenario(t, embeddedYAML)
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}); err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	if outcomes[ledger.OutcomeOK] != 6 {
		t.Fatalf("outcomes %v, want 6 ok", outcomes)
	}
	lc := eventsOf(evs, ledger.EventLeakCheck)
	if len(lc) != 1 || lc[0].Passed == nil || !*lc[0].Passed || !strings.Contains(lc[0].Detail, "3 endpoints") {
		t.Fatalf("leak check over the 3 workers: %+v", lc)
	}
	for _, name := range []string{"router.log", "prefill-0.log", "prefill-1.log", "decode-0.log"} {
		b, err := os.ReadFile(filepath.Join(dir, "logs", name))
		if err != nil || !strings.Contains(string(b), "listening") {
			t.Fatalf("%s: %v %q", name, err, b)
		}
	}
}

const colocatedYAML = `
name: colocated
duration: 1s
reference:
  prefill: 0
  decode: 0
workloads:
  - {name: b, type: burst, count: 4}
deadlines: {total: 10s}
self_check: {max_lag: 5s}
`

func TestEmbeddedColocated(t *testing.T) {
	bin := fakepd(t)
	dir := t.TempDir()
	if err := Run(context.Background(), parseScenario(t, colocatedYAML), Options{OutDir: dir, PDServerCommand: []string{bin}}); err != nil {
		t.Fatal(err)
	}
	if outcomes := checkOneTerminal(t, readLedger(t, dir)); outcomes[ledger.OutcomeOK] != 4 {
		t.Fatalf("outcomes %v", outcomes)
	}
}

func TestEmbeddedStartFailureIsInfrastructure(t *testing.T) {
	dir := t.TempDir()
	err := Run(context.Background(), parseScenario(t, embeddedYAML), Options{OutDir: dir, PDServerCommand: []string{"/nonexistent/pdserver"}})
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("err = %v, want an infrastructure error", err)
	}
}

// target.launch: the harness starts and supervises external processes (as it would
// SGLang on a GPU runner), and process faults apply to them by name.
func TestLaunchedTargetWithProcessFaults(t *testing.T) {
	bin := fakepd(t)
	port := freePort(t)
	yaml := fmt.Sprintf(`
name: launched
duration: 2s
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
  - {name: bounce, type: process_restart, target: server, at: 500ms}
  - {name: freeze, type: process_pause, target: server, at: 1200ms, for: 300ms}
deadlines: {connect: 2s, first_token: 3s, stall: 2s, total: 5s}
drain: {timeout: 8s, leak_timeout: 3s}
self_check: {max_lag: 5s}
assertions: [no_silent_drops]
`, port, bin)
	sc := parseScenario(t, yaml)
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	if outcomes[ledger.OutcomeOK] == 0 {
		t.Fatalf("outcomes %v", outcomes)
	}
	verified := 0
	for _, ev := range eventsOf(evs, ledger.EventFaultVerified) {
		if ev.Passed == nil || !*ev.Passed {
			t.Fatalf("fault not verified: %+v", ev)
		}
		verified++
	}
	if verified != 2 {
		t.Fatalf("%d faults verified, want 2", verified)
	}
	b, err := os.ReadFile(filepath.Join(dir, "logs", "server.log"))
	if err != nil || strings.Count(string(b), "listening") != 2 {
		t.Fatalf("server.log should show two starts: %v %q", err, b)
	}
}

// Ctrl-C with the embedded topology: Run returns promptly, the ledger is complete and
// every process is stopped.
func TestEmbeddedCancel(t *testing.T) {
	bin := fakepd(t)
	sc := parseScenario(t, strings.Replace(embeddedYAML, "duration: 1s", "duration: 5m", 1))
	sc.Workloads[0].Turns = 0 // until the window ends
	sc.Workloads[0].ThinkTime = scenarios.Duration(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	if err := Run(ctx, sc, Options{OutDir: dir, PDServerCommand: []string{bin}}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("Run took %v after Ctrl-C", el)
	}
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	if end := eventsOf(evs, ledger.EventRunEnd); len(end) != 1 {
		t.Fatal("no run_end")
	}
	// The topology is gone: its router no longer answers.
	for _, ev := range eventsOf(evs, ledger.EventLog) {
		if ev.URL != "" {
			if resp, err := http.Get(ev.URL + "/health"); err == nil {
				resp.Body.Close()
				t.Fatalf("router %s still answers after the run", ev.URL)
			}
		}
	}
}
