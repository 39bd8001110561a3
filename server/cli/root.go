package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"pdsoak/internal/gcfloor"
	"pdsoak/version"
)

// NewRootCommand returns the pdserver command: colocated, prefill and decode workers, plus
// the router, `up`, the SGLang launch spellings, shell completion and --version.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "pdserver",
		Short: "Reference prefill/decode-disaggregated LLM server (SGLang's PD mode, on loopback)",
		Long: `pdserver runs the processes of the reference server: a colocated worker (both phases),
prefill and decode workers of a PD deployment, and the router in front of them. Flags use
SGLang's names (--max-queued-requests, --context-length, --mem-fraction-static, ...).

Exit codes: 0 clean stop, 1 failure, 2 bad command line.`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Under another binary (harness pdserver) unknown commands reach RunE as args.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return usageErrorf("a command is required")
		},
	}
	// SuggestionsFor only matches prefixes unless a distance is set (cobra sets it lazily,
	// on its own unknown-command path, which pdserver's RunE replaces).
	root.SuggestionsMinimumDistance = 2
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newWorkerCommand(roleColocated), newWorkerCommand(rolePrefill), newWorkerCommand(roleDecode))
	root.AddCommand(newRouterCommand(), newUpCommand(), newSGLangServerCommand(), newSGLangRouterCommand())
	return root
}

// unknownCommand is the usage error for name, with cobra's "did you mean" suggestions.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageErrorf("%s (see %s --help)", msg, cmd.CommandPath())
}

// Execute runs pdserver with args and returns the process exit code: errors are printed
// on stderr by ErrorText.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// A server's heap is a few MB, and a request allocates 15-20 KB: at Go's 4 MiB minimum
	// goal the router ran a GC cycle every ~170 requests, each taking its only P for the
	// mark (GOMAXPROCS is its CPU share) and showing in the tail. The floor keeps the heap
	// goal at 64 MiB or more while the heap is small (internal/gcfloor; GOGC=off is kept).
	defer gcfloor.New().Start()()
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(stderr, ErrorText(err))
	}
	return ExitCode(err)
}

// internalPrefix matches the package prefixes errors carry inside the program ("cli: ",
// "engine: ", ...); a user of pdserver has no use for them.
var internalPrefix = regexp.MustCompile(`(^|\n|: )(?:(?:cli|engine|scheduler|kvpool|kernels|kvtransfer|launcher|supervisor|failpoint|api|gen|config): )+`)

// userMessage is err's text without internal package prefixes.
func userMessage(err error) string {
	return internalPrefix.ReplaceAllString(err.Error(), "$1")
}

// ErrorText is err as pdserver prints it: every line prefixed "pdserver: ", internal
// package prefixes removed. A binary that embeds the pdserver command prints its errors
// with it.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(userMessage(err), "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "pdserver") {
			lines[i] = "pdserver: " + l
		}
	}
	return strings.Join(lines, "\n")
}

// UsageError is a bad command line: an unknown flag, a bad flag value, a stray argument.
// ExitCode maps it to 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf builds a UsageError.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// noArgs is cobra.NoArgs returning a UsageError.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected argument %q (see %s --help)", cmd.CommandPath(), args[0], cmd.CommandPath())
	}
	return nil
}

// ExitCode is the process exit status for an error returned by Execute: 0 for nil, 2 for
// a usage error, 1 for anything else.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	// Errors cobra makes itself for unknown commands.
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "accepts ") {
		return 2
	}
	return 1
}

// parseLevel reads --log-level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not a log level (debug, info, warn, error)", s)
	}
	return l, nil
}

// newLogger builds the process logger for --log-level and --log-format.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// ioWriter is where logs go.
type ioWriter = io.Writer
