package router

import (
	"fmt"

	"pdsoak/server/gen"
)

// The router's refusals, worded once for the Router and the simulated router (sim).

// CheckRequest refuses a request no pair could serve: no prompt, or no tokens to
// generate.
func CheckRequest(req *gen.Request) error {
	if len(req.Prompt) == 0 || req.MaxTokens <= 0 {
		return fmt.Errorf("router: empty prompt or max_tokens %d: %w", req.MaxTokens, gen.ErrInvalid)
	}
	return nil
}

// NoPairError is the refusal when no healthy prefill/decode pair exists; why describes
// the workers ("": nothing said).
func NoPairError(why string) error {
	if why != "" {
		why = " (" + why + ")"
	}
	return fmt.Errorf("router: no healthy prefill/decode pair%s: %w", why, gen.ErrUnavailable)
}

// UnhealthyError ends an attempt whose worker (role prefill or decode) was marked
// unhealthy while the attempt watched it (abort-on-unhealthy); it counts as a
// transport failure.
func UnhealthyError(role, name string) error {
	return fmt.Errorf("router: %s %s became unhealthy: %w", role, name, gen.ErrUnavailable)
}

// LegError is how a leg to worker name (role prefill or decode) failed: err, the
// worker's own error or the request's end. LegUnreachable (no answer: ErrUnavailable)
// and LegBroken (the stream broke: ErrInternal) are the transport failures.
func LegError(role, name string, err error) error {
	return fmt.Errorf("router: %s %s: %w", role, name, err)
}

// LegUnreachable is a leg whose worker could not be reached (err: why).
func LegUnreachable(role, name string, err error) error {
	return fmt.Errorf("router: %s %s: %w: %w", role, name, gen.ErrUnavailable, err)
}

// LegBroken is a leg whose stream broke before its end (err: why).
func LegBroken(role, name string, err error) error {
	return fmt.Errorf("router: %s %s: %w: %w", role, name, gen.ErrInternal, err)
}
