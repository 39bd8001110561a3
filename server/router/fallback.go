package router

import (
	"fmt"
	"strings"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// Fallback is what the router does with a request when no prefill worker can take it.
// The pure decisions here (PickRoute, HasRoute) are shared by the Router and the
// simulator, like PickPair and HasPair.
type Fallback string

// Fallback modes (--pd-fallback).
const (
	// FallbackNone (the default): no prefill, no pair; the request is refused explicitly
	// (503 with ErrUnavailable), so disaggregation is never switched off silently.
	FallbackNone Fallback = "none"
	// FallbackDecodeOnly: with no usable prefill, the decode worker alone serves the
	// request, computing the prompt itself, as a decode-side routing proxy that falls
	// back on any prefill error does (issue 26). Every client request still succeeds;
	// only the prefill workers' counters show that disaggregation stopped.
	FallbackDecodeOnly Fallback = "decode-only"
)

// Fallbacks lists the accepted --pd-fallback values.
var Fallbacks = []Fallback{FallbackNone, FallbackDecodeOnly}

// ParseFallback parses a --pd-fallback value ("" is FallbackNone).
func ParseFallback(s string) (Fallback, error) {
	switch f := Fallback(strings.TrimSpace(s)); f {
	case "", FallbackNone:
		return FallbackNone, nil
	case FallbackDecodeOnly:
		return f, nil
	}
	return "", fmt.Errorf("router: --pd-fallback %q is unknown (want %s or %s)", s, FallbackNone, FallbackDecodeOnly)
}

// Route is a routing decision: a pair, or (DecodeOnly) a decode worker alone, Prefill -1.
type Route struct {
	Pair
	DecodeOnly bool
}

// PickRoute is PickPair, except that under FallbackDecodeOnly a request that finds no
// usable prefill (none healthy, all excluded by earlier attempts, or none with a
// bootstrap address) goes to the best decode alone. Without the fallback it is PickPair,
// draw for draw.
func PickRoute(prefill, decode []Candidate, bugs scheduler.BugSet, fb Fallback, intn func(int) int, describe func() string) (Route, error) {
	pair, err := PickPair(prefill, decode, bugs, intn, describe)
	if err == nil || fb != FallbackDecodeOnly {
		return Route{Pair: pair}, err
	}
	// The decode is chosen by PickPair's own rule (fewest outstanding, ties drawn from
	// intn), against one healthy stand-in prefill.
	standIn := []Candidate{{Healthy: true, HasBootstrap: true}}
	d, derr := PickPair(standIn, decode, bugs, intn, describe)
	if derr != nil {
		return Route{Pair: Pair{-1, -1}}, err
	}
	return Route{Pair: Pair{Prefill: -1, Decode: d.Decode}, DecodeOnly: true}, nil
}

// HasRoute reports whether a request can be served at all (the router's Healthy): a
// healthy pair, or under FallbackDecodeOnly a healthy decode alone.
func HasRoute(prefill, decode []Candidate, bugs scheduler.BugSet, fb Fallback) bool {
	if HasPair(prefill, decode, bugs) {
		return true
	}
	if fb != FallbackDecodeOnly {
		return false
	}
	for _, w := range decode {
		if w.Healthy {
			return true
		}
	}
	return false
}

// WithPDFallback sets what the router does when no prefill can take a request (default
// FallbackNone: refuse it explicitly).
func WithPDFallback(fb Fallback) Option { return func(r *Router) { r.fallback = fb } }

// decodeOnlyRequest is the /generate body of a decode-only request: no bootstrap room,
// and decode_only, so the decode worker computes the prompt itself.
func decodeOnlyRequest(wr *gen.WorkerRequest) {
	wr.BootstrapRoom, wr.BootstrapAddr, wr.DecodeOnly = nil, "", true
}
