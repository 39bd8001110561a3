package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"pdsoak/server/engine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// execute runs the root command with args and returns its error and output.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		flag string // the message must name it
	}{
		{"unknown flag", []string{"colocated", "--no-such-flag"}, "--no-such-flag"},
		{"bad int", []string{"colocated", "--port", "abc"}, "--port"},
		{"port range", []string{"colocated", "--port", "70000"}, "--port"},
		{"backend", []string{"colocated", "--backend", "gpu"}, "--backend"},
		{"semantics", []string{"decode", "--semantics", "loose"}, "--semantics"},
		{"mem fraction", []string{"colocated", "--mem-fraction-static", "1.5"}, "--mem-fraction-static"},
		{"context length", []string{"colocated", "--context-length", "0"}, "--context-length"},
		{"max running", []string{"colocated", "--max-running-requests", "0"}, "--max-running-requests"},
		{"page size", []string{"colocated", "--page-size", "0"}, "--page-size"},
		{"max total below a page", []string{"colocated", "--max-total-tokens", "3"}, "--max-total-tokens"},
		{"timeout", []string{"colocated", "--watchdog-timeout", "soon"}, "--watchdog-timeout"},
		{"log level", []string{"colocated", "--log-level", "loud"}, "--log-level"},
		{"profile", []string{"colocated", "--backend", "simtime", "--sim-profile", "nope"}, "--sim-profile"},
		{"fault token missing", []string{"colocated", "--enable-fault-injection"}, "--fault-injection-token"},
		{"bootstrap port on decode", []string{"decode", "--disaggregation-bootstrap-port", "1"}, "--disaggregation-bootstrap-port"},
		{"stray argument", []string{"colocated", "extra"}, "extra"},
		{"unknown command", []string{"frobnicate"}, "frobnicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := execute(t, tc.args...)
			if err == nil {
				t.Fatalf("no error; output %s", out)
			}
			if code := ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (%v)", code, err)
			}
			if !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("error %q does not name %s", err, tc.flag)
			}
		})
	}
}

func TestManyProblemsAtOnce(t *testing.T) {
	_, err := execute(t, "colocated", "--port", "-1", "--max-running-requests", "0", "--semantics", "x")
	for _, flag := range []string{"--port", "--max-running-requests", "--semantics"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("%q missing from %v", flag, err)
		}
	}
}

func TestHelpListsSGLangFlags(t *testing.T) {
	out, err := execute(t, "prefill", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--host", "--port", "--model-name", "--backend", "--seed", "--sim-profile",
		"--max-queued-requests", "--max-running-requests", "--context-length", "--mem-fraction-static",
		"--device-memory-gb", "--max-total-tokens", "--page-size", "--cuda-graph-max-bs",
		"--disable-overlap-schedule", "--watchdog-timeout", "--bootstrap-timeout", "--prealloc-timeout",
		"--transfer-timeout", "--waiting-timeout", "--running-timeout", "--request-timeout", "--semantics",
		"--disaggregation-bootstrap-port", "--log-level", "--enable-fault-injection", "--fault-injection-token"} {
		if !strings.Contains(out, flag) {
			t.Errorf("help lacks %s", flag)
		}
	}
}

func TestExtraCommands(t *testing.T) {
	saved := extraCommands
	defer func() { extraCommands = saved }()
	extraCommands = append(extraCommands, func() *cobra.Command { return &cobra.Command{Use: "probe", Run: func(*cobra.Command, []string) {}} })
	root := NewRootCommand()
	if c, _, err := root.Find([]string{"probe"}); err != nil || c.Name() != "probe" {
		t.Fatalf("registered command not found: %v", err)
	}
}

func TestSecondsValue(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"300", 300 * time.Second, true}, {"0.5", 500 * time.Millisecond, true}, {"-1", -time.Second, true},
		{"250ms", 250 * time.Millisecond, true}, {"5m", 5 * time.Minute, true}, {"0", 0, true},
		{"soon", 0, false}, {"NaN", 0, false}, {"1e300", 0, false}, {"", 0, false},
	}
	for _, tc := range tests {
		var s secondsValue
		err := s.Set(tc.in)
		if (err == nil) != tc.ok || (tc.ok && time.Duration(s) != tc.want) {
			t.Errorf("Set(%q) = %v, %v; want %v ok=%v", tc.in, time.Duration(s), err, tc.want, tc.ok)
		}
	}
}

func TestFlagsMapOntoConfigs(t *testing.T) {
	f := defaultWorkerFlags()
	fs := pflag.NewFlagSet("decode", pflag.ContinueOnError)
	f.register(fs, false)
	if err := fs.Parse([]string{"--max-queued-requests", "32", "--context-length", "524288",
		"--mem-fraction-static", "0.5", "--cuda-graph-max-bs", "96", "--disable-overlap-schedule",
		"--semantics", "sglang", "--transfer-timeout", "15", "--prealloc-timeout", "-1", "--backend", "simtime",
		"--page-size", "32", "--seed", "9", "--model-name", "m"}); err != nil {
		t.Fatal(err)
	}
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	ec := f.engineConfig(engine.RoleDecode)
	if ec.Role != engine.RoleDecode || ec.Semantics != engine.SemanticsSGLang || ec.MaxQueuedRequests != 32 ||
		ec.ContextLength != 524288 || ec.MemFractionStatic != 0.5 || ec.CudaGraphMaxBS != 96 ||
		!ec.DisableOverlapSchedule || ec.TransferTimeout != 15*time.Second || ec.PreallocTimeout != -time.Second ||
		ec.PageSize != 32 {
		t.Fatalf("engine config %+v", ec)
	}
	if err := ec.Validate(); err != nil {
		t.Fatal(err)
	}
	kc := f.kernelsConfig()
	if kc.Backend != "simtime" || kc.PageSize != 32 || kc.Seed != 9 || kc.Model != "m" {
		t.Fatalf("kernels config %+v", kc)
	}
}

func TestExitCode(t *testing.T) {
	if ExitCode(nil) != 0 || ExitCode(context.Canceled) != 1 || ExitCode(&UsageError{Err: context.Canceled}) != 2 {
		t.Fatal("exit codes")
	}
}
