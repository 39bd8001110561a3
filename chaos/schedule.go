package chaos

import (
	"fmt"
	"sort"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// The timeline's scheduling rules as pure functions: Timeline carries them out with
// goroutines on the wall clock, the simulator (sim) on its virtual clock, so both order
// steps, poll Verify and give up on a proof alike.

// Verify polling: the pause after the first poll, doubling up to VerifyMaxInterval.
const (
	VerifyFirstInterval = 20 * time.Millisecond
	VerifyMaxInterval   = 500 * time.Millisecond
)

// NextVerifyInterval is the pause after a poll when the previous pause was d.
func NextVerifyInterval(d time.Duration) time.Duration { return min(2*d, VerifyMaxInterval) }

// PlannedStep is a step of the plan with the index of its fault in the spec list.
type PlannedStep struct {
	Step
	Index int
}

// Schedule orders the apply and revert steps of faults (names already set): by time,
// reverts before applies at the same instant, then in spec order. A fault with no for
// is held to the end and has no revert step.
func Schedule(faults []scenarios.Fault) []PlannedStep {
	var ps []PlannedStep
	for i, f := range faults {
		ps = append(ps, PlannedStep{Step{At: f.At.D(), Kind: StepApply, Fault: f}, i})
		if f.For > 0 {
			ps = append(ps, PlannedStep{Step{At: f.At.D() + f.For.D(), Kind: StepRevert, Fault: f}, i})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].At != ps[j].At {
			return ps[i].At < ps[j].At
		}
		if ps[i].Kind != ps[j].Kind {
			return ps[i].Kind == StepRevert
		}
		return ps[i].Index < ps[j].Index
	})
	return ps
}

// VerifyBound is when the verification of fault f, applied at applied on a timeline
// started at start, gives up: the verify timeout after it was applied, or its revert
// time when that comes first. why completes fault_verified's "no proof <why>".
func VerifyBound(f scenarios.Fault, start, applied time.Time, timeout time.Duration) (deadline time.Time, why string) {
	deadline, why = applied.Add(timeout), "within "+timeout.String()
	if f.For > 0 {
		revertAt := f.At.D() + f.For.D()
		if due := start.Add(revertAt); due.Before(deadline) {
			deadline, why = due, "before its revert at "+revertAt.String()
		}
	}
	return deadline, why
}

// FaultEvent is a ledger event of type typ about fault f (the caller sets the time).
func FaultEvent(typ ledger.EventType, f scenarios.Fault) ledger.Event {
	return ledger.Event{Type: typ, Fault: f.Name, FaultType: f.Type, Target: f.Target, Params: f.Params}
}

// NotVerifiedError is the error of a fault with no proof why (VerifyBound's words).
func NotVerifiedError(why, name string, last error) error {
	return fmt.Errorf("%w %s: %s: %w", ErrNotVerified, why, name, last)
}

// ApplyFailedError is the error of a fault whose Apply failed.
func ApplyFailedError(name string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrApply, name, err)
}
