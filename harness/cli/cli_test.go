package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

var update = flag.Bool("update", false, "rewrite golden files")

// selfExecEnv makes this test binary act as the harness command (for the embedded
// server's child processes, which run "<binary> pdserver ...").
const selfExecEnv = "HARNESS_CLI_TEST_SELF_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(selfExecEnv) == "1" {
		os.Exit(Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// fakeLedger builds a small ledger: n requests with the given outcomes, plus optional extras.
func fakeLedger(outcomes []ledger.Outcome, extra ...ledger.Event) []ledger.Event {
	evs := []ledger.Event{{Time: at(0), Type: ledger.EventRunStart, Scenario: "fake", Seed: 1}}
	for i, o := range outcomes {
		id := fmt.Sprintf("r%d", i)
		s := at(float64(i))
		evs = append(evs,
			ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: id, Workload: "agents"},
			ledger.Event{Time: s.Add(time.Second), Type: ledger.EventDone, RequestID: id, Workload: "agents", Outcome: o, E2E: 1, TTFT: 0.1, Scheduled: &s})
	}
	evs = append(evs, ledger.Event{Time: at(99), Type: ledger.EventLeakCheck, Passed: ledger.Bool(true)})
	evs = append(evs, extra...)
	return append(evs, ledger.Event{Time: at(100), Type: ledger.EventRunEnd})
}

// fakeRunner writes a ledger and reports every event through OnEvent, as harness.Run does.
type fakeRunner struct {
	events []ledger.Event
	err    error
	got    *scenarios.Scenario
	opts   RunOptions
}

func (f *fakeRunner) run(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
	f.got, f.opts = sc, opts
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range f.events {
		if e.Type == ledger.EventRunStart {
			e.Scenario, e.Seed = sc.Name, sc.Seed
		}
		_ = enc.Encode(e)
		if opts.OnEvent != nil {
			opts.OnEvent(e)
		}
	}
	if err := os.WriteFile(filepath.Join(opts.OutDir, ledger.EventsFile), buf.Bytes(), 0o644); err != nil {
		return err
	}
	return f.err
}

func execute(t *testing.T, args []string, opts ...Option) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	opts = append([]Option{WithStatusInterval(time.Hour)}, opts...)
	code := Execute(context.Background(), args, &out, &errb, opts...)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "name: bad\nworkloads:\n  - type: agents\n    agnets: 3\n")
	invalid := writeFile(t, dir, "invalid.yaml", "name: invalid\nworkloads:\n  - type: agents\n    agents: 0\n")
	syntax := writeFile(t, dir, "syntax.yaml", "name: s\nworkloads: [\n")
	faulty := writeFile(t, dir, "faulty.yaml", "name: faulty\nworkloads:\n  - type: agents\nfaults:\n  - type: meteor\n    target: decode-9\n")
	good := writeFile(t, dir, "good.yaml", "name: good\nduration: 5s\nworkloads:\n  - type: agents\n    agents: 2\n    turns: 1\n")
	ok := []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeRejected}
	known := WithFaultTypes(map[string]scenarios.FaultType{"decode_crash": {Targets: scenarios.TargetProcess}})

	tests := []struct {
		name   string
		args   []string
		runner *fakeRunner
		code   int
		stdout string
		stderr string
	}{
		{name: "validate embedded smoke", args: []string{"validate", "smoke"}, code: 0, stdout: "smoke.yaml: ok"},
		{name: "validate a good file", args: []string{"validate", good}, code: 0, stdout: "ok (scenario good"},
		{name: "bad YAML key names file, line and field", args: []string{"validate", bad}, code: 2,
			stderr: bad + `:4: workloads[0].agnets: unknown field (did you mean "agents"?)`},
		{name: "bad value names file, line and field", args: []string{"validate", invalid}, code: 2,
			stderr: invalid + ":4: workloads[0].agents: must be ≥ 1"},
		{name: "syntax error", args: []string{"validate", syntax}, code: 2, stderr: syntax + ":2: YAML syntax"},
		{name: "unknown fault type and target", args: []string{"validate", faulty}, code: 2,
			stderr: faulty + `:5: faults[0].type: unknown fault type "meteor" (known: decode_crash)`},
		{name: "unknown scenario", args: []string{"validate", "no-such-scenario"}, code: 2, stderr: "neither a file nor an embedded scenario"},
		{name: "unknown scenario on run", args: []string{"run", "no-such-scenario"}, code: 2, stderr: "embedded: "},
		{name: "missing argument", args: []string{"run"}, code: 2, stderr: "needs exactly one SCENARIO"},
		{name: "unknown flag", args: []string{"run", "smoke", "--bogus"}, code: 2, stderr: "unknown flag: --bogus"},
		{name: "bad flag value", args: []string{"run", "smoke", "--duration", "soon"}, code: 2, stderr: "invalid argument"},
		{name: "unknown command", args: []string{"fly"}, code: 2, stderr: "unknown command"},
		{name: "bad --semantics", args: []string{"plan", "smoke", "--semantics", "lax"}, code: 2, stderr: `reference.semantics: must be strict or sglang, got "lax"`},
		{name: "bad --target", args: []string{"validate", good}, code: 0},
		{name: "plan with an override that breaks the scenario", args: []string{"plan", faulty}, code: 2},
		{name: "run passes", args: []string{"run", good, "--out", filepath.Join(dir, "pass")},
			runner: &fakeRunner{events: fakeLedger(ok)}, code: 0, stdout: "PASS  good"},
		{name: "run with a silent drop fails", args: []string{"run", good, "--out", filepath.Join(dir, "fail")},
			runner: &fakeRunner{events: fakeLedger(append(ok, ledger.OutcomeDeadlineExceeded))}, code: 1, stdout: "FAIL  good"},
		{name: "run infrastructure failure", args: []string{"run", good, "--out", filepath.Join(dir, "infra")},
			runner: &fakeRunner{events: fakeLedger(ok), err: errors.New("harness: router did not become healthy")}, code: 3,
			stderr: "router did not become healthy"},
		{name: "run invalid: harness was the bottleneck", args: []string{"run", good, "--out", filepath.Join(dir, "lag")},
			runner: &fakeRunner{events: fakeLedger(ok, ledger.Event{Time: at(50), Type: ledger.EventSelfCheck, Passed: ledger.Bool(false), Detail: "p99 lag 2s"})},
			code:   3, stderr: "harness was the bottleneck"},
		{name: "run without a ledger is invalid", args: []string{"run", good, "--out", filepath.Join(dir, "noledger"), "-q"},
			runner: &fakeRunner{}, code: 3, stdout: "INVALID good"},
		{name: "quiet run", args: []string{"run", good, "--out", filepath.Join(dir, "quiet"), "--quiet"},
			runner: &fakeRunner{events: fakeLedger(ok)}, code: 0, stdout: "PASS good: 3 requests, 0 silent drops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{known}
			if tt.runner != nil {
				opts = append(opts, WithRunner(tt.runner.run))
			} else {
				opts = append(opts, WithRunner(func(context.Context, *scenarios.Scenario, RunOptions) error {
					t.Error("runner called")
					return nil
				}))
			}
			code, stdout, stderr := execute(t, tt.args, opts...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr)
			}
		})
	}
}

func TestRunWritesOutputs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeStalled})}
	code, stdout, _ := execute(t, []string{"run", "smoke", "--out", out, "--seed", "7", "--duration", "12s", "--semantics", "sglang"}, WithRunner(r.run))
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	for _, f := range []string{ledger.EventsFile, reports.ResultsFile, reports.JUnitFile, reports.SummaryFile, "harness.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	var res reports.Results
	data, _ := os.ReadFile(filepath.Join(out, reports.ResultsFile))
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Verdict != reports.VerdictFail || res.SilentDrops != 1 {
		t.Errorf("verdict %s silent drops %d", res.Verdict, res.SilentDrops)
	}
	if r.got.Seed != 7 || r.got.Duration.D() != 12*time.Second || r.got.Workloads[0].Duration.D() != 12*time.Second || r.got.Reference.Semantics != "sglang" {
		t.Errorf("overrides not applied: seed %d duration %s workload %s semantics %s", r.got.Seed, r.got.Duration, r.got.Workloads[0].Duration, r.got.Reference.Semantics)
	}
	if len(r.opts.PDServerCommand) != 2 || r.opts.PDServerCommand[1] != "pdserver" {
		t.Errorf("PDServerCommand %v", r.opts.PDServerCommand)
	}
	if r.opts.Logger == nil {
		t.Error("no logger")
	}
}

func TestRunTargetOverride(t *testing.T) {
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
	code, stdout, stderr := execute(t, []string{"run", "smoke", "--target", "http://127.0.0.1:9", "--out", t.TempDir()}, WithRunner(r.run))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if r.got.Target.URL != "http://127.0.0.1:9" {
		t.Errorf("target %q", r.got.Target.URL)
	}
	for _, a := range r.got.Assertions {
		if a == reports.AssertNoLeaks {
			t.Error("no_leaks kept without a metrics URL")
		}
	}
	if !strings.Contains(stdout, "no_leaks skipped") {
		t.Errorf("no note about no_leaks:\n%s", stdout)
	}
	// With --metrics-url, no_leaks stays.
	r2 := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
	execute(t, []string{"run", "smoke", "--target", "http://127.0.0.1:9", "--metrics-url", "http://127.0.0.1:9/metrics", "--out", t.TempDir()}, WithRunner(r2.run))
	if r2.got == nil || !strings.Contains(strings.Join(r2.got.Assertions, ","), reports.AssertNoLeaks) {
		t.Error("no_leaks dropped despite --metrics-url")
	}
}

func TestDefaultOutDir(t *testing.T) {
	wd, _ := os.Getwd()
	dir := t.TempDir()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
	code, _, _ := execute(t, []string{"run", "smoke"}, WithRunner(r.run), WithClock(func() time.Time { return t0 }))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if want := filepath.Join("out", "smoke-20261202T100000Z"); r.opts.OutDir != want {
		t.Errorf("out dir %q, want %q", r.opts.OutDir, want)
	}
}

func TestList(t *testing.T) {
	code, stdout, _ := execute(t, []string{"list"})
	if code != 0 || !strings.Contains(stdout, "smoke") || !strings.Contains(stdout, "default CI check") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}

func TestPlanGolden(t *testing.T) {
	code, stdout, stderr := execute(t, []string{"plan", "smoke", "--seed", "5", "--duration", "45s"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join("testdata", "plan-smoke.golden")
	if *update {
		_ = os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if stdout != string(want) {
		t.Errorf("plan differs (run with -update):\n%s", stdout)
	}
}

func TestStatusLine(t *testing.T) {
	var buf bytes.Buffer
	s := newStatus(&buf, false, time.Hour)
	clock := t0
	s.now = func() time.Time { return clock }
	s.start, s.lastAt = t0, t0
	for i := 0; i < 5; i++ {
		s.observe(ledger.Event{Type: ledger.EventScheduled})
	}
	s.observe(ledger.Event{Type: ledger.EventDone, Outcome: ledger.OutcomeOK})
	s.observe(ledger.Event{Type: ledger.EventDone, Outcome: ledger.OutcomeStalled})
	s.observe(ledger.Event{Type: ledger.EventDone, Outcome: ledger.OutcomeHTTPError})
	s.observe(ledger.Event{Type: ledger.EventFaultStart, Fault: "f"})
	clock = t0.Add(2 * time.Second)
	got := s.line()
	want := "    2s  in flight 2  done 3  ok 1  rejected 0  errors 1  silent drops 1  1.5 req/s  faults active 1"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	go s.run()
	s.close()
}

func TestStatusPrintsPeriodically(t *testing.T) {
	var buf lockedBuffer
	s := newStatus(&buf, false, time.Millisecond)
	go s.run()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "in flight") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.close()
	if !strings.Contains(buf.String(), "in flight 0") {
		t.Errorf("no status line: %q", buf.String())
	}
}

func TestReportRecomputes(t *testing.T) {
	out := t.TempDir()
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeStalled})}
	if code, _, stderr := execute(t, []string{"run", "smoke", "--out", out, "-q"}, WithRunner(r.run)); code != 1 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	if err := os.Remove(filepath.Join(out, reports.ResultsFile)); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := execute(t, []string{"report", out})
	if code != 1 || !strings.Contains(stdout, "FAIL  smoke") {
		t.Errorf("report exit %d:\n%s", code, stdout)
	}
	if _, err := os.Stat(filepath.Join(out, reports.ResultsFile)); err != nil {
		t.Error("results.json not rewritten")
	}
	if code, _, stderr := execute(t, []string{"report", t.TempDir()}); code != 2 || !strings.Contains(stderr, "not a run's output directory") {
		t.Errorf("report of an empty dir: exit %d %s", code, stderr)
	}
}

func TestInterruptStillWritesOutputs(t *testing.T) {
	out := t.TempDir()
	runner := func(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			return errors.New("context not cancelled by SIGINT")
		}
		f := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeCancelled})}
		return f.run(context.Background(), sc, opts)
	}
	code, stdout, stderr := execute(t, []string{"run", "smoke", "--out", out}, WithRunner(runner))
	if code != 3 || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{reports.ResultsFile, reports.JUnitFile, reports.SummaryFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s after interrupt", f)
		}
	}
}

// TestReadmeExampleValidates keeps the scenario example in README.md honest.
func TestReadmeExampleValidates(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README.md")
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\n")
	if !ok {
		t.Skip("README has no yaml example")
	}
	example, _, _ := strings.Cut(rest, "```")
	p := writeFile(t, t.TempDir(), "readme.yaml", example)
	if code, stdout, stderr := execute(t, []string{"validate", p}); code != 0 {
		t.Errorf("README example: exit %d\n%s%s", code, stdout, stderr)
	}
}
