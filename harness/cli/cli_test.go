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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/internal/testutil"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/version"
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

// fakeRunner writes a ledger and reports every event through OnEvent, as harness.Run
// does: the options' notes right after run_start, and run_end carrying the run's error
// and the cause of an interruption.
type fakeRunner struct {
	events []ledger.Event
	err    error
	got    *scenarios.Scenario
	opts   RunOptions
}

func (f *fakeRunner) run(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
	f.got, f.opts = sc, opts
	if f.events == nil {
		return f.err // failed before the ledger was created
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	emit := func(e ledger.Event) {
		_ = enc.Encode(e)
		if opts.OnEvent != nil {
			opts.OnEvent(e)
		}
	}
	for _, e := range f.events {
		switch e.Type {
		case ledger.EventRunStart:
			e.Scenario, e.Seed = sc.Name, sc.Seed
			emit(e)
			for _, n := range opts.Notes {
				emit(ledger.Event{Time: e.Time, Type: ledger.EventNote, Message: n})
			}
			continue
		case ledger.EventRunEnd:
			if f.err != nil {
				e.Error = f.err.Error()
			}
			if ctx.Err() != nil {
				e.Interrupted = context.Cause(ctx).Error()
			}
		}
		emit(e)
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
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "name: bad\nworkloads:\n  - type: agents\n    agnets: 3\n")
	invalid := writeFile(t, dir, "invalid.yaml", "name: invalid\nworkloads:\n  - type: agents\n    agents: 0\n")
	syntax := writeFile(t, dir, "syntax.yaml", "name: s\nworkloads: [\n")
	faulty := writeFile(t, dir, "faulty.yaml", "name: faulty\nworkloads:\n  - type: agents\nfaults:\n  - type: meteor\n    target: decode-9\n")
	good := writeFile(t, dir, "good.yaml", "name: good\nduration: 5s\nworkloads:\n  - type: agents\n    agents: 2\n    turns: 1\n")
	external := writeFile(t, dir, "external.yaml", "name: external\ntarget:\n  url: http://127.0.0.1:9\nworkloads:\n  - type: agents\n")
	leaks := writeFile(t, dir, "leaks.yaml", "name: leaks\nworkloads:\n  - type: agents\nassertions: [no_silent_drops, no_leaks]\n")
	threshold := writeFile(t, dir, "threshold.yaml", "name: threshold\nworkloads:\n  - type: agents\nassertions:\n  - p95(ttft) < 2s\n  - p99(tftt) < 2s\n")
	ok := []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeOK, ledger.OutcomeRejected}
	writeFile(t, dir, "bad.jsonl", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 1}\n")
	badTrace := writeFile(t, dir, "trace.yaml", "name: tr\nduration: 10s\nworkloads:\n  - type: trace\n    trace:\n      file: bad.jsonl\n")
	unknownTrace := writeFile(t, dir, "trace-unknown.yaml", "name: tr\nduration: 10s\nworkloads:\n  - type: trace\n    trace:\n      file: bad.yaml\n")
	known := WithFaultTypes(map[string]scenarios.FaultType{"decode_crash": {Targets: scenarios.TargetProcess}})

	tests := []struct {
		name      string
		args      []string
		runner    *fakeRunner
		code      int
		stdout    string
		stderr    string
		notStderr string
	}{
		{name: "validate embedded smoke", args: []string{"validate", "smoke"}, code: 0, stdout: "smoke.yaml: ok"},
		{name: "validate a good file", args: []string{"validate", good}, code: 0, stdout: "ok (scenario good, 1 workload, 0 faults, 4 assertions)"},
		{name: "bad YAML key names file, line and field", args: []string{"validate", bad}, code: 2,
			stderr: bad + `:4: workloads[0].agnets: unknown field (did you mean "agents"?)`},
		{name: "bad value names file, line and field", args: []string{"validate", invalid}, code: 2,
			stderr: invalid + ":4: workloads[0].agents: must be ≥ 1"},
		{name: "one problem is singular", args: []string{"validate", invalid}, code: 2, stderr: "harness: 1 problem in the scenario\n"},
		{name: "syntax error", args: []string{"validate", syntax}, code: 2, stderr: syntax + ":2: YAML syntax"},
		{name: "unknown fault type and target", args: []string{"validate", faulty}, code: 2,
			stderr: faulty + `:5: faults[0].type: unknown fault type "meteor" (known: decode_crash)`},
		{name: "a threshold over an unknown name names its line and a hint", args: []string{"validate", threshold}, code: 2,
			stderr: threshold + `:6: assertions[1]: assertion "p99(tftt) < 2s": p99() takes ttft, itl or e2e, not "tftt" (did you mean "ttft"?)`},
		{name: "unknown scenario", args: []string{"validate", "no-such-scenario"}, code: 2, stderr: "harness: \"no-such-scenario\" is neither a file nor an embedded scenario"},
		{name: "unknown scenario on run", args: []string{"run", "no-such-scenario"}, code: 2, stderr: "embedded: "},
		// It exited 3 (an infrastructure failure) with "read DIR: read DIR: is a directory".
		{name: "a directory is not a scenario", args: []string{"validate", dir}, code: 2,
			stderr: dir + ": cannot read the scenario: is a directory"},
		// Both said "scenarios: traces: ..." (the loop below refuses package names).
		{name: "a bad trace line names the trace file, line and field", args: []string{"validate", badTrace}, code: 2,
			stderr: badTrace + ":6: workloads[0].trace.file: " + filepath.Join(dir, "bad.jsonl") + ":2: input_length: must be in [0, 16777216], got -3"},
		{name: "a trace of unknown format", args: []string{"validate", unknownTrace}, code: 2,
			stderr: unknownTrace + ":6: workloads[0].trace.file: " + filepath.Join(dir, "bad.yaml") + ": unknown format"},
		{name: "missing argument", args: []string{"run"}, code: 2, stderr: "harness: run needs exactly one SCENARIO"},
		{name: "unknown flag", args: []string{"run", "smoke", "--bogus"}, code: 2, stderr: "harness: unknown flag: --bogus"},
		{name: "bad flag value", args: []string{"run", "smoke", "--duration", "soon"}, code: 2, stderr: `harness: invalid argument "soon" for "--duration" flag: invalid duration "soon"`},
		{name: "bad number", args: []string{"plan", "smoke", "--seed", "x"}, code: 2, stderr: `invalid argument "x" for "--seed" flag`},
		{name: "unknown command", args: []string{"fly"}, code: 2, stderr: `harness: unknown command "fly"`},
		{name: "unknown command with a suggestion", args: []string{"rnu"}, code: 2, stderr: `(did you mean "run"?)`},
		{name: "no arguments: usage on stderr", args: []string{}, code: 2, stderr: "Usage:\n  harness [flags]"},
		{name: "version", args: []string{"--version"}, code: 0, stdout: version.String() + "\n"},
		{name: "completion is offered", args: []string{"completion", "bash"}, code: 0, stdout: "bash completion"},
		{name: "completion is listed", args: []string{"--help"}, code: 0, stdout: "completion "},
		{name: "bad --semantics", args: []string{"plan", "smoke", "--semantics", "lax"}, code: 2, stderr: `reference.semantics: must be strict or sglang, got "lax"`},
		{name: "--semantics with --target", args: []string{"run", good, "--target", "http://127.0.0.1:9", "--semantics", "sglang"}, code: 2,
			stderr: "harness: --semantics applies only to the embedded reference server"},
		{name: "--semantics with target.url", args: []string{"validate", external, "--semantics", "strict"}, code: 2, stderr: "--semantics applies only"},
		{name: "--semantics with --target is said before the problems it causes", args: []string{"validate", "smoke", "--target", "http://127.0.0.1:9", "--semantics", "sglang"},
			code: 2, stderr: "--semantics applies only", notStderr: "no_leaks"},
		{name: "--metrics-url with the embedded server", args: []string{"plan", good, "--metrics-url", "http://127.0.0.1:9/metrics"}, code: 2,
			stderr: "--metrics-url applies only to an external target"},
		{name: "validate takes run's overrides", args: []string{"validate", good, "--target", "http://127.0.0.1:9", "--metrics-url", "http://127.0.0.1:9/metrics",
			"--duration", "1m", "--seed", "3"}, code: 0, stdout: "ok (scenario good"},
		// Refused before the run: the scenario lists no_leaks and --target brings no
		// metrics URL (scenarios.Validate runs after the overrides).
		{name: "no_leaks with --target and no metrics URL", args: []string{"run", leaks, "--target", "http://127.0.0.1:9"}, code: 2, stderr: "no_leaks"},
		{name: "plan with an override that breaks the scenario", args: []string{"plan", faulty}, code: 2},
		{name: "run passes", args: []string{"run", good, "--out", filepath.Join(dir, "pass")},
			runner: &fakeRunner{events: fakeLedger(ok)}, code: 0, stdout: "PASS  good"},
		{name: "run with a silent drop fails", args: []string{"run", good, "--out", filepath.Join(dir, "fail")},
			runner: &fakeRunner{events: fakeLedger(append(ok, ledger.OutcomeDeadlineExceeded))}, code: 1, stdout: "FAIL  good"},
		{name: "run infrastructure failure is said once, in the verdict", args: []string{"run", good, "--out", filepath.Join(dir, "infra")},
			runner: &fakeRunner{events: fakeLedger(ok), err: errors.New("harness: router did not become healthy")}, code: 3,
			stdout: "INVALID: run failed: router did not become healthy", notStderr: "router"},
		{name: "run failure before the ledger is still seen", args: []string{"run", good, "--out", filepath.Join(dir, "early"), "-q"},
			runner: &fakeRunner{err: errors.New("harness: out dir: permission denied")}, code: 3,
			stdout: "INVALID good: 0 requests, 0 silent drops; no readable ledger", stderr: "harness: run failed: out dir: permission denied"},
		{name: "run invalid: harness was the bottleneck", args: []string{"run", good, "--out", filepath.Join(dir, "lag")},
			runner: &fakeRunner{events: fakeLedger(ok, ledger.Event{Time: at(50), Type: ledger.EventSelfCheck, Passed: ledger.Bool(false), Detail: "p99 lag 2s"})},
			code:   3, stdout: "harness was the bottleneck", notStderr: "bottleneck"},
		{name: "run without a ledger is invalid", args: []string{"run", good, "--out", filepath.Join(dir, "noledger"), "-q"},
			runner: &fakeRunner{}, code: 3, stdout: "INVALID good"},
		{name: "quiet run", args: []string{"run", good, "--out", filepath.Join(dir, "quiet"), "--quiet"},
			runner: &fakeRunner{events: fakeLedger(ok)}, code: 0, stdout: "PASS good: 3 requests, 0 silent drops"},
		{name: "quiet run, one request", args: []string{"run", good, "--out", filepath.Join(dir, "one"), "--quiet"},
			runner: &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeStalled})}, code: 1, stdout: "FAIL good: 1 request, 1 silent drop; failed: no_silent_drops"},
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
			assert.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			assert.Contains(t, stdout, tt.stdout)
			assert.Contains(t, stderr, tt.stderr)
			if tt.notStderr != "" {
				assert.NotContains(t, stderr, tt.notStderr)
			}
			for _, pkg := range []string{"scenarios: ", "reports: ", "chaos: ", "ledger: ", "time: ", "strconv.", "harness: harness"} {
				assert.NotContains(t, stderr, pkg, "an internal package name leaks")
			}
		})
	}
}

func TestRunWritesOutputs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeStalled})}
	code, stdout, _ := execute(t, []string{"run", "smoke", "--out", out, "--seed", "7", "--duration", "12s", "--semantics", "sglang"}, WithRunner(r.run))
	require.Equal(t, 1, code, stdout)
	for _, f := range []string{ledger.EventsFile, reports.ResultsFile, reports.JUnitFile, reports.SummaryFile, "harness.log"} {
		assert.FileExists(t, filepath.Join(out, f))
	}
	var res reports.Results
	data, err := os.ReadFile(filepath.Join(out, reports.ResultsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &res))
	assert.Equal(t, reports.VerdictFail, res.Verdict)
	assert.Equal(t, 1, res.SilentDrops)
	assert.Equal(t, int64(7), r.got.Seed)
	assert.Equal(t, 12*time.Second, r.got.Duration.D())
	assert.Equal(t, 12*time.Second, r.got.Workloads[0].Duration.D())
	assert.Equal(t, "sglang", r.got.Reference.Semantics)
	require.Len(t, r.opts.PDServerCommand, 2)
	assert.Equal(t, "pdserver", r.opts.PDServerCommand[1])
	assert.NotNil(t, r.opts.Logger)
}

// TestRunTargetOverride: --target sets the URL only; the scenario's metrics and debug
// URLs (and so its leak check) stay, and --metrics-url sets the metrics URL.
func TestRunTargetOverride(t *testing.T) {
	dir := t.TempDir()
	withMetrics := writeFile(t, dir, "metrics.yaml", `name: metrics
target:
  url: http://127.0.0.1:1
  metrics_url: http://127.0.0.1:2/metrics
  debug_url: http://127.0.0.1:2/debug/requests
workloads:
  - type: agents
assertions: [no_silent_drops, no_leaks]
`)
	launched := writeFile(t, dir, "launch.yaml", `name: launch
target:
  url: http://127.0.0.1:1
  metrics_url: http://127.0.0.1:1/metrics
  launch:
    - name: server
      role: colocated
      command: [sleep, "60"]
workloads:
  - type: agents
`)
	tests := []struct {
		name            string
		args            []string
		url, metrics    string
		debug           string
		launch          int
		note            string
		assertionsCount int
	}{
		{name: "--target keeps metrics_url and debug_url", args: []string{"run", withMetrics, "--target", "http://127.0.0.1:9"},
			url: "http://127.0.0.1:9", metrics: "http://127.0.0.1:2/metrics", debug: "http://127.0.0.1:2/debug/requests"},
		{name: "--metrics-url sets only the metrics URL", args: []string{"run", withMetrics, "--metrics-url", "http://127.0.0.1:3/metrics"},
			url: "http://127.0.0.1:1", metrics: "http://127.0.0.1:3/metrics", debug: "http://127.0.0.1:2/debug/requests"},
		{name: "both", args: []string{"run", withMetrics, "--target", "http://127.0.0.1:9", "--metrics-url", "http://127.0.0.1:9/metrics"},
			url: "http://127.0.0.1:9", metrics: "http://127.0.0.1:9/metrics", debug: "http://127.0.0.1:2/debug/requests"},
		{name: "without --target, target.launch stays", args: []string{"run", launched},
			url: "http://127.0.0.1:1", metrics: "http://127.0.0.1:1/metrics", launch: 1},
		{name: "--target replaces target.launch, with a note", args: []string{"run", launched, "--target", "http://127.0.0.1:9"},
			url: "http://127.0.0.1:9", metrics: "http://127.0.0.1:1/metrics", note: "--target replaces target.launch: the scenario's 1 launched process is not started"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
			code, stdout, stderr := execute(t, append(tt.args, "--out", out), WithRunner(r.run))
			require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
			assert.Equal(t, tt.url, r.got.Target.URL)
			assert.Equal(t, tt.metrics, r.got.Target.MetricsURL)
			assert.Equal(t, tt.debug, r.got.Target.DebugURL)
			assert.Len(t, r.got.Target.Launch, tt.launch)
			assert.Contains(t, r.got.Assertions, reports.AssertNoLeaks, "the leak check is kept")
			var res reports.Results
			data, err := os.ReadFile(filepath.Join(out, reports.ResultsFile))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &res))
			if tt.note == "" {
				assert.Empty(t, r.opts.Notes)
				assert.NotContains(t, stdout, "note:")
				return
			}
			assert.Equal(t, []string{tt.note}, r.opts.Notes, "the note reaches the runner")
			assert.Contains(t, stdout, "harness: note: "+tt.note+"\n", "printed as its event goes by")
			assert.Equal(t, []string{tt.note}, res.Notes, "and lands in results.json")
		})
	}
}

func TestNotesPrintedAsTheyHappen(t *testing.T) {
	msg := "NVML library missing although /dev/nvidia0 exists"
	evs := fakeLedger([]ledger.Outcome{ledger.OutcomeOK}, ledger.Event{Time: at(2), Type: ledger.EventNote, Message: msg})
	tests := []struct {
		name   string
		quiet  bool
		inErr  bool
		prefix string
	}{
		{name: "with the status line, on stdout", prefix: "harness: note: "},
		{name: "quiet, on stderr", quiet: true, inErr: true, prefix: "harness: note: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"run", "smoke", "--out", t.TempDir()}
			if tt.quiet {
				args = append(args, "-q")
			}
			r := &fakeRunner{events: evs}
			code, stdout, stderr := execute(t, args, WithRunner(r.run))
			require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
			where, other := stdout, stderr
			if tt.inErr {
				where, other = stderr, stdout
			}
			assert.Equal(t, 1, strings.Count(where, tt.prefix+msg+"\n"), where)
			assert.NotContains(t, other, msg)
		})
	}
}

func TestDefaultOutDir(t *testing.T) {
	t.Chdir(t.TempDir())
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK})}
	code, _, _ := execute(t, []string{"run", "smoke"}, WithRunner(r.run), WithClock(func() time.Time { return t0 }))
	require.Equal(t, 0, code)
	assert.Equal(t, filepath.Join("out", "smoke-20261202T100000Z"), r.opts.OutDir)
}

func TestList(t *testing.T) {
	code, stdout, _ := execute(t, []string{"list"})
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "smoke")
	assert.Contains(t, stdout, "default CI check")
}

func TestPlanGolden(t *testing.T) {
	code, stdout, stderr := execute(t, []string{"plan", "smoke", "--seed", "5", "--duration", "45s"})
	require.Equal(t, 0, code, stderr)
	path := filepath.Join("testdata", "plan-smoke.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(stdout), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update")
	assert.Equal(t, string(want), stdout, "plan differs (run with -update)")
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
	assert.Equal(t, "    2s  in flight 2  done 3  ok 1  rejected 0  errors 1  silent drops 1  1.5 req/s  faults active 1", s.line())
	go s.run()
	s.close()
}

func TestStatusNote(t *testing.T) {
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{name: "plain", want: "harness: note: hello\n"},
		{name: "terminal clears the live line", tty: true, want: "\r\033[Kharness: note: hello\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := newStatus(&buf, tt.tty, time.Hour)
			s.observe(ledger.Event{Type: ledger.EventNote, Message: "hello"})
			assert.Equal(t, tt.want, buf.String())
		})
	}
}

func TestStatusPrintsPeriodically(t *testing.T) {
	var buf testutil.SyncBuffer
	s := newStatus(&buf, false, time.Millisecond)
	go s.run()
	defer s.close()
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "in flight 0") }, time.Minute, time.Millisecond)
}

func TestReportRecomputes(t *testing.T) {
	out := t.TempDir()
	r := &fakeRunner{events: fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeStalled})}
	code, _, stderr := execute(t, []string{"run", "smoke", "--out", out, "-q"}, WithRunner(r.run))
	require.Equal(t, 1, code, stderr)
	require.NoError(t, os.Remove(filepath.Join(out, reports.ResultsFile)))
	code, stdout, _ := execute(t, []string{"report", out})
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "FAIL  smoke")
	assert.FileExists(t, filepath.Join(out, reports.ResultsFile))
	code, _, stderr = execute(t, []string{"report", t.TempDir()})
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "not a run's output directory")
}

// TestReportReproducesRun: `harness report DIR` rewrites results.json, summary.md,
// junit.xml and report.html byte for byte as `harness run` wrote them, notes and invalid reasons
// included, and prints the same table and verdict.
func TestReportReproducesRun(t *testing.T) {
	dir := t.TempDir()
	launched := writeFile(t, dir, "launch.yaml", "name: launch\ntarget:\n  url: http://127.0.0.1:1\n  launch:\n    - name: s\n      role: colocated\n      command: [sleep, \"1\"]\nworkloads:\n  - type: agents\n")
	ok := []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeOK}
	tests := []struct {
		name   string
		args   []string
		runner *fakeRunner
		code   int
	}{
		{name: "pass", args: []string{"run", "smoke"}, runner: &fakeRunner{events: fakeLedger(ok)}, code: 0},
		{name: "fail", args: []string{"run", "smoke"}, runner: &fakeRunner{events: fakeLedger(append(ok, ledger.OutcomeStalled))}, code: 1},
		{name: "invalid: run error", args: []string{"run", "smoke"}, runner: &fakeRunner{events: fakeLedger(ok), err: errors.New("harness: decode-0 exited")}, code: 3},
		{name: "notes from the command line", args: []string{"run", launched, "--target", "http://127.0.0.1:9"}, runner: &fakeRunner{events: fakeLedger(ok,
			ledger.Event{Time: at(3), Type: ledger.EventNote, Message: "a note from the harness"})}, code: 0},
		{name: "not evaluated", args: []string{"run", "smoke"}, runner: &fakeRunner{events: withoutLeakCheck(fakeLedger(ok))}, code: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			code, runOut, stderr := execute(t, append(tt.args, "--out", out), WithRunner(tt.runner.run))
			require.Equal(t, tt.code, code, "%s\n%s", runOut, stderr)
			files := []string{reports.ResultsFile, reports.SummaryFile, reports.JUnitFile, reports.HTMLFile}
			written := map[string][]byte{}
			for _, f := range files {
				data, err := os.ReadFile(filepath.Join(out, f))
				require.NoError(t, err)
				written[f] = data
				require.NoError(t, os.Remove(filepath.Join(out, f)))
			}
			code, reportOut, stderr := execute(t, []string{"report", out})
			require.Equal(t, tt.code, code, stderr)
			for _, f := range files {
				data, err := os.ReadFile(filepath.Join(out, f))
				require.NoError(t, err)
				assert.Equal(t, string(written[f]), string(data), "%s differs between run and report", f)
			}
			assert.Contains(t, runOut, reportOut, "report prints the table run printed")
			assert.Empty(t, stderr)
		})
	}
}

func withoutLeakCheck(evs []ledger.Event) []ledger.Event {
	var out []ledger.Event
	for _, e := range evs {
		if e.Type != ledger.EventLeakCheck {
			out = append(out, e)
		}
	}
	return out
}

func TestInterruptStillWritesOutputs(t *testing.T) {
	out := t.TempDir()
	runner := func(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute): // a hang guard, never reached when it works
			return errors.New("context not cancelled by SIGINT")
		}
		// Cut short: no leak check, one request cancelled.
		f := &fakeRunner{events: withoutLeakCheck(fakeLedger([]ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeCancelled}))}
		return f.run(ctx, sc, opts)
	}
	code, stdout, stderr := execute(t, []string{"run", "smoke", "--out", out}, WithRunner(runner))
	assert.Equal(t, 3, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "INVALID: interrupted before the run completed: interrupt signal received")
	assert.Regexp(t, `no_leaks\s+NOT EVALUATED\s+the run was interrupted before the leak check`, stdout, "an interrupted run's leak check is not evaluated, not failed")
	assert.Empty(t, stderr)
	for _, f := range []string{reports.ResultsFile, reports.JUnitFile, reports.SummaryFile} {
		assert.FileExists(t, filepath.Join(out, f))
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
	code, stdout, stderr := execute(t, []string{"validate", p})
	assert.Equal(t, 0, code, "README example:\n%s%s", stdout, stderr)
}
