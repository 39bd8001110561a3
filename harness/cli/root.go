package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"pdsoak/harness"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"pdsoak/explore"
	"pdsoak/reports"
	"pdsoak/scenarios"
	servercli "pdsoak/server/cli"
	"pdsoak/version"
)

// Exit codes of the harness command.
const (
	ExitPass    = 0 // every assertion passed
	ExitFail    = 1 // an assertion failed
	ExitUsage   = 2 // bad scenario or command line
	ExitInfra   = 3 // target or infrastructure failure, or an invalid run
	exitUnknown = ExitInfra
)

// ExitError carries an exit code up to Execute.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// usageError is a bad command line.
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("harness: "+format, args...)}
}

// Option configures the root command (tests inject a runner and a clock).
type Option func(*app)

// WithRunner replaces harness.Run.
func WithRunner(r RunFunc) Option { return func(a *app) { a.run = r } }

// WithSimRunner replaces the runner of `run --sim` (simRun: sim.Run with the built-in
// topology).
func WithSimRunner(r RunFunc) Option { return func(a *app) { a.simRun = r } }

// WithClock replaces time.Now (for the default output directory name).
func WithClock(now func() time.Time) Option { return func(a *app) { a.now = now } }

// WithStatusInterval sets how often progress is printed (default 500ms on a terminal,
// 10s otherwise).
func WithStatusInterval(d time.Duration) Option { return func(a *app) { a.statusEvery = d } }

// WithFaultTypes replaces the chaos registry used for validation.
func WithFaultTypes(types map[string]scenarios.FaultType) Option {
	return func(a *app) { a.faultTypes = types }
}

type app struct {
	run         RunFunc
	now         func() time.Time
	statusEvery time.Duration
	faultTypes  map[string]scenarios.FaultType
	pdCommand   func() []string
	shard       harness.Shard // run --shard, for the command being run
	simRun      RunFunc
	sim         bool // run --sim, for the command being run

	// exploreRun is the simulator explore runs on; nil: defaultExploreRun.
	exploreRun explore.RunFunc

	// telemetry is run's live outputs, for the command being run.
	telemetry telemetryFlags
}

// NewRootCommand returns the harness command tree.
func NewRootCommand(opts ...Option) *cobra.Command {
	a := &app{run: harnessRun, simRun: simRun, now: time.Now, pdCommand: selfPDServer}
	for _, o := range opts {
		o(a)
	}
	if a.faultTypes == nil {
		a.faultTypes = faultTypes()
	}
	root := &cobra.Command{
		Use:   "harness",
		Short: "Prove that an LLM serving deployment never silently drops a request",
		Long: `harness runs a scenario: concurrent agent sessions and open-loop load against an
OpenAI-compatible endpoint (the embedded reference PD server by default), faults on a
timeline, and assertions that every request resolved — a complete response or an explicit
error — within its deadline.

Exit codes: 0 pass, 1 an assertion failed, 2 bad scenario or usage, 3 an invalid run:
target or infrastructure failure, an interrupted run, an assertion that could not be
evaluated, or a run where the harness itself was the bottleneck.`,
		Version:       version.String(),
		Args:          rootArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// No subcommand: the usage on stderr and exit 2, like pdserver.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return &ExitError{Code: ExitUsage}
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(a.runCommand(), a.validateCommand(), a.planCommand(), a.listCommand(), a.faultsCommand(), a.reportCommand())
	root.AddCommand(a.mergeCommand())
	root.AddCommand(a.compareCommand(), a.trendCommand())
	root.AddCommand(a.k8sCommand())
	root.AddCommand(a.exploreCommand())
	root.AddCommand(a.nightlyCommand(), a.doctorCommand())
	pd := servercli.NewRootCommand()
	pd.Hidden = true
	pd.Short = "Run the reference server (used by harness run to start the embedded topology)"
	root.AddCommand(pd)
	return root
}

// selfPDServer is the command that starts the reference server: this binary's hidden
// pdserver subcommand.
func selfPDServer() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "pdserver"}
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer, opts ...Option) int {
	root := NewRootCommand(opts...)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitPass
	}
	if cmd != nil && isUnder(cmd, "pdserver") {
		fmt.Fprintln(stderr, servercli.ErrorText(err))
		return servercli.ExitCode(err)
	}
	code := exitCode(err)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Err != nil {
		printError(stderr, err)
	}
	return code
}

func isUnder(cmd *cobra.Command, name string) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == name && c.Parent() != nil {
			return true
		}
	}
	return false
}

// printError prints err for a user: "harness: " and the message without the Go package
// prefixes it gathered on the way up.
func printError(w io.Writer, err error) {
	var ps scenarios.Problems
	if errors.As(err, &ps) {
		for _, l := range ps.Lines() {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintf(w, "harness: %s in the scenario\n", ps.Summary())
		return
	}
	fmt.Fprintln(w, "harness: "+reports.Readable(err.Error()))
}

// rootArgs refuses an unknown subcommand with cobra's "did you mean" suggestions.
func rootArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError("%s; see %s --help", msg, cmd.CommandPath())
}

// exitCode maps an error to the exit code. Only this function (and Execute) decide codes.
func exitCode(err error) int {
	var ee *ExitError
	var ps scenarios.Problems
	switch {
	case err == nil:
		return ExitPass
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ps), errors.Is(err, scenarios.ErrNotFound):
		return ExitUsage
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "arg(s)") ||
		strings.HasPrefix(msg, "invalid argument") || strings.HasPrefix(msg, "required flag") {
		return ExitUsage
	}
	return exitUnknown
}

// exactlyOne is cobra.ExactArgs(1) with a usage exit code.
func exactlyOne(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError("%s needs exactly one SCENARIO (a path or an embedded name; see harness list), got %s", cmd.Name(), plural(len(args), "argument", "arguments"))
	}
	return nil
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usageError("%s takes no arguments, got %q", cmd.Name(), args[0])
	}
	return nil
}
