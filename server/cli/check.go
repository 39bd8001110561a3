package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// CheckWorkerArgs parses and validates a worker's flags exactly as `pdserver colocated`,
// `prefill` or `decode` (role) would before it starts, and starts nothing: a scenario's
// reference.args, prefill_args and decode_args are checked with it at validate time.
// The fault-injection token is not looked for (the harness hands it over at start).
func CheckWorkerArgs(role string, args []string) error {
	var isPrefill bool
	switch role {
	case string(roleColocated), string(roleDecode):
	case string(rolePrefill):
		isPrefill = true
	default:
		return fmt.Errorf("cli: unknown worker role %q", role)
	}
	f := defaultWorkerFlags()
	fs := pflag.NewFlagSet(role, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs, isPrefill)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("cli: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cli: unexpected argument %q (flags only)", fs.Arg(0))
	}
	f.enableFaultInjection = false
	if err := f.validate(); err != nil {
		return fmt.Errorf("cli: %w", err)
	}
	return nil
}

// CheckRouterArgs does the same for `pdserver router`'s flags; the worker URLs the
// harness adds itself are stood in for when args give none.
func CheckRouterArgs(args []string) error {
	f := defaultRouterFlags()
	fs := pflag.NewFlagSet("router", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("cli: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cli: unexpected argument %q (flags only)", fs.Arg(0))
	}
	if len(f.prefill) == 0 {
		f.prefill = []string{"http://127.0.0.1:1"}
	}
	if len(f.decode) == 0 {
		f.decode = []string{"http://127.0.0.1:2"}
	}
	if _, _, _, err := f.workers(); err != nil {
		return fmt.Errorf("cli: %w", err)
	}
	return nil
}
