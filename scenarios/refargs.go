package scenarios

import (
	"slices"
	"strings"
)

// ReferenceCheck validates the embedded reference server's flags for one role
// (colocated, prefill, decode, router) with the server's own flag code, starting
// nothing (the harness passes pdsoak/server/cli's checks): a bad flag in
// reference.args is a validation problem with its field path, not a run that fails to
// start (exit 3).
type ReferenceCheck func(role string, args []string) error

// WithReferenceCheck makes Validate check reference.args, prefill_args, decode_args
// and router_args with check.
func WithReferenceCheck(check ReferenceCheck) Option {
	return func(o *options) { o.refCheck = check }
}

// checkReferenceArgs checks the flags of each role the embedded topology would start,
// in the order the launcher composes them, and blames the first field that makes a
// role's flags fail.
func (v *validator) checkReferenceArgs(o options) {
	sc, check := v.sc, o.refCheck
	ref := sc.Reference
	if check == nil || !sc.Embedded() || len(sc.Target.Launch) > 0 ||
		!slices.Contains([]string{"tinyref", "simtime", "paced"}, ref.Backend) || !slices.Contains([]string{"strict", "sglang"}, ref.Semantics) {
		return
	}
	common := []string{"--backend", ref.Backend, "--semantics", ref.Semantics}
	if ref.Profile != "" {
		common = append(common, "--sim-profile", ref.Profile)
	}
	common = append(common, ref.Args...)
	with := func(extra []string) []string { return append(append([]string(nil), common...), extra...) }
	blame := func(path string, err error) {
		v.add(path, "the reference server refuses these flags: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "cli: "), "\n", "; "))
	}
	if ref.Prefill == 0 && ref.Decode == 0 {
		if err := check("colocated", common); err != nil {
			blame("reference.args", err)
		}
		return
	}
	if err := check("decode", common); err != nil {
		blame("reference.args", err)
		return
	}
	if err := check("prefill", with(ref.PrefillArgs)); err != nil {
		blame("reference.prefill_args", err)
	}
	if err := check("decode", with(ref.DecodeArgs)); err != nil {
		blame("reference.decode_args", err)
	}
	if err := check("router", append([]string{"--semantics", ref.Semantics}, ref.RouterArgs...)); err != nil {
		blame("reference.router_args", err)
	}
}
