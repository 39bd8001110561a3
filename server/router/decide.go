package router

import (
	"errors"
	"fmt"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// The router's decisions as pure functions of what it knows: the Router calls them from
// its goroutines and the simulator (sim) from its event loop, so both route, retry and
// give up alike. None of them does I/O, reads a clock or holds a lock.

// Candidate is one worker as a pairing decision sees it.
type Candidate struct {
	Healthy  bool
	Excluded bool // failed an earlier attempt of this request
	// HasBootstrap: the prefill's KV bootstrap address is known (always true for decode).
	HasBootstrap bool
	Outstanding  int64
}

// Pair is a pairing decision: indexes into the prefill and decode candidates.
type Pair struct {
	Prefill, Decode int
}

// PickPair picks the healthy, not excluded prefill (with a bootstrap address) and decode
// with the fewest outstanding requests; intn(n) breaks ties (prefill first, then
// decode, drawn only when candidates exist). Under scheduler.BugDecodeOnlyWhenPrefillDown
// a decode is paired with the first not excluded prefill that has a bootstrap address
// even when no prefill is healthy (sglang#31206). The error wraps gen.ErrUnavailable;
// describe, when not nil, says why in it.
func PickPair(prefill, decode []Candidate, bugs scheduler.BugSet, intn func(int) int, describe func() string) (Pair, error) {
	best := func(ws []Candidate, needBoot bool) int {
		cands := make([]int, 0, len(ws))
		var low int64 = -1
		for i, w := range ws {
			if !w.Healthy || w.Excluded || (needBoot && !w.HasBootstrap) {
				continue
			}
			switch n := w.Outstanding; {
			case low < 0 || n < low:
				cands, low = append(cands[:0], i), n
			case n == low:
				cands = append(cands, i)
			}
		}
		if len(cands) == 0 {
			return -1
		}
		return cands[intn(len(cands))]
	}
	p, d := best(prefill, true), best(decode, false)
	if p < 0 && d >= 0 && bugs.Has(scheduler.BugDecodeOnlyWhenPrefillDown) {
		for i, w := range prefill {
			if !w.Excluded && w.HasBootstrap {
				p = i
				break
			}
		}
	}
	if p < 0 || d < 0 {
		why := ""
		if describe != nil {
			why = describe()
		}
		return Pair{-1, -1}, NoPairError(why)
	}
	return Pair{p, d}, nil
}

// HasPair reports whether some healthy pair can take a request (the router's Healthy):
// a healthy prefill with a bootstrap address (or, under
// BugDecodeOnlyWhenPrefillDown, none needed) and a healthy decode.
func HasPair(prefill, decode []Candidate, bugs scheduler.BugSet) bool {
	up := func(ws []Candidate, needBoot bool) bool {
		for _, w := range ws {
			if w.Healthy && (!needBoot || w.HasBootstrap) {
				return true
			}
		}
		return false
	}
	return (up(prefill, true) || bugs.Has(scheduler.BugDecodeOnlyWhenPrefillDown)) && up(decode, false)
}

// DecodeOnly reports whether an attempt sends the decode leg alone: the
// BugDecodeOnlyWhenPrefillDown reproduction, with the paired prefill unhealthy.
func DecodeOnly(bugs scheduler.BugSet, prefillHealthy bool) bool {
	return bugs.Has(scheduler.BugDecodeOnlyWhenPrefillDown) && !prefillHealthy
}

// Room derives a bootstrap room from a draw of the router's generator and its salt; a
// zero result asks for another draw (ok false).
func Room(draw, salt uint64) (room uint64, ok bool) {
	v := (draw ^ salt) >> 1
	return v, v != 0
}

// Attempt is how one attempt on a pair ended, as the retry decision sees it.
type Attempt struct {
	Err       error
	Sent      bool // tokens reached the client
	Transport bool // no usable answer from a worker (refused, reset, truncated)
	// Number is the attempt's index (0 for the first).
	Number, MaxRetries int
	// DeadlinePassed: the request's deadline (plus the router's grace) passed;
	// ClientGone: the client went away. At most one is set.
	DeadlinePassed, ClientGone bool
}

// Retryable reports whether another pair may serve a request whose attempt failed with
// err (transport set: the worker gave no usable answer).
func Retryable(err error, transport bool) bool {
	return transport || errors.Is(err, gen.ErrUnavailable) || errors.Is(err, gen.ErrTransfer) ||
		errors.Is(err, gen.ErrOverloaded)
}

// AfterAttempt decides what follows a failed attempt: retry on another pair (final nil,
// retry true; exclude the failed worker), or end the request with final.
func AfterAttempt(a Attempt) (final error, retry bool) {
	switch {
	case a.DeadlinePassed && !errors.Is(a.Err, gen.ErrTimeout):
		return &gen.StageError{Stage: "total", Err: fmt.Errorf("%w: router: request deadline passed: %w", gen.ErrTimeout, a.Err)}, false
	case a.DeadlinePassed || a.ClientGone:
		// The request's context ended (the real router cannot tell a deadline from a
		// client that left once the leg itself timed out).
		return fmt.Errorf("router: client went away: %w", gen.ErrAborted), false
	case a.Sent || !Retryable(a.Err, a.Transport) || a.Number >= a.MaxRetries:
		return a.Err, false
	}
	return nil, true
}

// PrefillAction is what the end of an attempt's prefill leg means.
type PrefillAction int

// Prefill leg outcomes.
const (
	// PrefillIgnore: the leg succeeded, or failed after decode had its KV.
	PrefillIgnore PrefillAction = iota
	// PrefillFailAttempt: the leg failed before decode had its KV: cancel the decode leg
	// and fail the attempt.
	PrefillFailAttempt
	// PrefillLeaveDecode: the leg failed but the decode leg is left waiting
	// (BugPrefillFailNoDecodeAbort, sglang#9726).
	PrefillLeaveDecode
)

// PrefillEnded decides what the prefill leg's end (err nil: success) means for the
// attempt; kvArrived is set once decode streamed a token.
func PrefillEnded(err error, kvArrived bool, bugs scheduler.BugSet) PrefillAction {
	switch {
	case err == nil || kvArrived:
		return PrefillIgnore
	case bugs.Has(scheduler.BugPrefillFailNoDecodeAbort):
		return PrefillLeaveDecode
	}
	return PrefillFailAttempt
}
