package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"pdsoak/internal/testutil"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// pdserverBinary builds cmd/pdserver once per test binary (the real reference server).
func pdserverBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the reference server")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "pdsoak-harness-test-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "pdserver"), "pdsoak/cmd/pdserver")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build pdserver: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "pdserver")
}

func freePort(t *testing.T) int { return testutil.FreePort(t) }

// startColocatedServer runs `pdserver colocated` on a free port until the test ends.
func startColocatedServer(t *testing.T, args ...string) string {
	t.Helper()
	bin := pdserverBinary(t)
	port := freePort(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "pdserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"colocated", "--port", fmt.Sprint(port), "--backend", "tinyref", "--seed", "1"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("pdserver exited:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatal("pdserver did not become healthy")
	return ""
}

func smokeScenario(url string) *scenarios.Scenario {
	sc := &scenarios.Scenario{Name: "real-smoke", Seed: 3, Duration: scenarios.Duration(5 * time.Second),
		Target: scenarios.Target{URL: url, MetricsURL: url + "/metrics"},
		Workloads: []scenarios.Workload{
			{Name: "agents", Type: "agents", Agents: 4, Turns: 3, MaxTokens: 8, PromptTokens: 32, ToolResultBytes: 64,
				ToolLatency: scenarios.Duration(50 * time.Millisecond), Stream: true},
			{Name: "ol", Type: "open_loop", MaxTokens: 8, Count: 8, Pacer: &scenarios.Pacer{Type: "poisson", Rate: 2}},
		},
		Deadlines: scenarios.Deadlines{Connect: scenarios.Duration(30 * time.Second), FirstToken: scenarios.Duration(30 * time.Second),
			Stall: scenarios.Duration(15 * time.Second), Total: scenarios.Duration(45 * time.Second)},
		Drain: scenarios.Drain{Timeout: scenarios.Duration(50 * time.Second), LeakTimeout: scenarios.Duration(15 * time.Second)},
		// A loaded machine makes the harness seconds late; the smoke is about the server.
		SelfCheck: scenarios.SelfCheck{MaxLag: scenarios.Duration(30 * time.Second)},
	}
	return sc
}

// realPDYAML is a short smoke against the embedded reference PD topology (router +
// prefill + decode processes of the real pdserver). What it sends is fixed by counts
// (turns, the open loop's count) in a window far longer than the work, so two runs
// send the same requests however loaded the machine; the run ends when they are done.
const realPDYAML = `
name: real-pd-smoke
seed: 3
duration: 2m
reference:
  prefill: 1
  decode: 1
  backend: tinyref
  args: ["--max-total-tokens", "65536"]
workloads:
  - name: agents
    type: agents
    agents: 4
    turns: 3
    max_tokens: 8
    prompt_tokens: 32
    tool_result_bytes: 64
    tool_latency: 50ms
  - name: ol
    type: open_loop
    max_tokens: 8
    count: 8
    pacer: {type: poisson, rate: 2}
deadlines: {connect: 30s, first_token: 30s, stall: 15s, total: 45s}
drain: {timeout: 50s, leak_timeout: 15s}
self_check: {max_lag: 30s}
`

// Against the real reference PD server started by the harness itself: a short smoke
// passes — every request ok, no leaks on any worker — and two runs with the same seed
// send the same requests and get the same completions.
func TestRealServerSmokeAndDeterminism(t *testing.T) {
	bin := pdserverBinary(t)
	run := func() []ledger.Event {
		dir := t.TempDir()
		sc, err := scenarios.Parse("real.yaml", []byte(realPDYAML))
		if err != nil {
			t.Fatal(err)
		}
		if err := Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}); err != nil {
			t.Fatal(err)
		}
		return readLedger(t, dir)
	}
	first := run()
	outcomes := checkOneTerminal(t, first)
	if outcomes[ledger.OutcomeOK] == 0 || len(outcomes) != 1 {
		for _, ev := range eventsOf(first, ledger.EventDone) {
			if ev.Outcome != ledger.OutcomeOK {
				t.Logf("%s: %s %s %s", ev.RequestID, ev.Outcome, ev.Phase, ev.Error)
			}
		}
		t.Fatalf("outcomes %v: want only ok", outcomes)
	}
	lc := eventsOf(first, ledger.EventLeakCheck)
	if len(lc) != 1 || lc[0].Passed == nil || !*lc[0].Passed || !strings.Contains(lc[0].Detail, "2 endpoints") {
		t.Fatalf("leak check over prefill and decode: %+v", lc)
	}
	if sc := eventsOf(first, ledger.EventSelfCheck); len(sc) == 1 {
		t.Logf("self-check: %s", sc[0].Detail)
	}
	if s := eventsOf(first, ledger.EventSample); len(s) == 0 {
		t.Fatal("no server samples recorded")
	}
	second := run()
	done := func(evs []ledger.Event) string {
		var out []string
		for _, ev := range eventsOf(evs, ledger.EventDone) {
			out = append(out, fmt.Sprintf("%s:%s:%d", ev.RequestID, ev.Outcome, ev.CompletionTokens))
		}
		sort.Strings(out)
		return strings.Join(out, "\n")
	}
	if a, b := done(first), done(second); a != b {
		t.Fatalf("same seed, different requests or completions:\n%s\n---\n%s", a, b)
	}
}

// The --target path against a real server the harness did not start.
func TestRealServerExternalTarget(t *testing.T) {
	url := startColocatedServer(t)
	sc := smokeScenario(url)
	sc.Duration = scenarios.Duration(2 * time.Second)
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	if outcomes := checkOneTerminal(t, evs); len(outcomes) != 1 || outcomes[ledger.OutcomeOK] == 0 {
		t.Fatalf("outcomes %v: want only ok", outcomes)
	}
	if lc := eventsOf(evs, ledger.EventLeakCheck); len(lc) != 1 || lc[0].Passed == nil || !*lc[0].Passed {
		t.Fatalf("leak check: %+v", lc)
	}
}
