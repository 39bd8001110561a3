package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Bug names one upstream SGLang PD bug the reference server can reproduce
// (--sglang-bug NAME, repeatable, only with --semantics sglang). Each is a deviation
// from the SGLang semantics the reference otherwise models after the upstream fix; the
// strict path never looks at them.
type Bug string

// The bug zoo (scenarios/zoo/<name>.yaml runs each one).
const (
	// BugDecodeOOMRequeue (sgl-project/sglang#6857): a decode request retracted on
	// out-of-memory goes back to the prealloc queue with its transfer already marked
	// done, and prealloc skips requests not waiting for input: it is never popped again.
	BugDecodeOOMRequeue Bug = "decode-oom-requeue"
	// BugPrefillFailNoDecodeAbort (#9726): when the prefill leg fails, the router keeps
	// waiting for the decode leg instead of aborting it; decode waits for KV that never
	// comes.
	BugPrefillFailNoDecodeAbort Bug = "prefill-fail-no-decode-abort"
	// BugAbortMissesQueues (#8177, fixed by PR #8352): an abort does not reach the
	// disaggregation queues (prefill bootstrap and inflight, decode prealloc and
	// transfer); the aborted request keeps its KV pages there.
	BugAbortMissesQueues Bug = "abort-misses-queues"
	// BugDecodeOnlyWhenPrefillDown (#31206): with the prefill worker's circuit open, the
	// router still dispatches the decode leg alone; decode waits for KV that never comes.
	BugDecodeOnlyWhenPrefillDown Bug = "decode-only-when-prefill-down"
	// BugAbortStormOrphans (#26912): an aborted request in prefill's bootstrap queue is
	// orphaned there: never popped, never expired, the queue gauge never returns to 0.
	BugAbortStormOrphans Bug = "abort-storm-orphans"
	// BugAbortedPrefillGarbage (#30233): a prefill request that is aborted after decode
	// registered its room does not stop decode: decode generates from KV pages that were
	// never (fully) written, and the client gets a 200 with wrong text.
	BugAbortedPrefillGarbage Bug = "aborted-prefill-garbage"
	// BugBootstrapRetryEveryStep (PRs #19900, #20785): decode checks an unreachable
	// prefill bootstrap server on its scheduler thread, blocking, and retries on every
	// step: the whole decode engine freezes.
	BugBootstrapRetryEveryStep Bug = "bootstrap-retry-every-step"
	// BugStaleBootstrapEndpoint (#33789, fixed by PR #36029): decode caches what it
	// learnt about a prefill bootstrap address and never invalidates it; after prefill
	// restarts behind the same address every request times out.
	BugStaleBootstrapEndpoint Bug = "stale-bootstrap-endpoint"
	// BugTransferringNeverTimesOut (PR #31800): the decode waiting timeout
	// (--disaggregation-waiting-timeout) applies only until the first KV frame; a
	// receiver stuck in Transferring never times out and holds its slot and pages.
	BugTransferringNeverTimesOut Bug = "transferring-never-times-out"
	// BugBootstrapFreezeAtRate (#10110; mechanism after #11809): decode's prealloc
	// window (MaxRunningRequests requests past prealloc) also counts the rooms still
	// pending in the prealloc queue. Decode registers a room with prefill only when it
	// preallocates it, so once a burst leaves more rooms pending than the window holds
	// the window never reopens: nothing registers, prefill's bootstrap queue waits, and
	// the pair is idle until the bootstrap timeout fails every request.
	BugBootstrapFreezeAtRate Bug = "bootstrap-freeze-at-rate"
	// BugPrefillAbortCacheLeak (fixed by sgl-project/sglang PR #36926, "Fix disaggregated
	// prefill cache leak after abort"): a disaggregated prefill request aborted while its
	// forward step is in flight loses scheduler ownership when the step's result
	// arrives; nothing releases it, so its KV pages and its radix cache lock stay held
	// (a locked node that never unlocks, token usage that never returns to 0). A
	// request ended by a timeout counts as aborted (SGLang finishes it with FINISH_ABORT).
	BugPrefillAbortCacheLeak Bug = "prefill-abort-cache-leak"
)

// BugInfo describes one bug of the zoo.
type BugInfo struct {
	Name     Bug
	Upstream string // "sgl-project/sglang#6857"
	Role     string // the process whose behaviour it changes: decode, prefill, router
	Summary  string
}

// Bugs lists the bugs the reference server reproduces.
var Bugs = []BugInfo{
	{BugDecodeOOMRequeue, "sgl-project/sglang#6857", "decode",
		"a request retracted on decode OOM returns to prealloc marked as transferred and is never popped"},
	{BugPrefillFailNoDecodeAbort, "sgl-project/sglang#9726", "router",
		"a failed prefill leg does not abort the decode leg; decode waits for KV forever"},
	{BugDecodeOnlyWhenPrefillDown, "sgl-project/sglang#31206", "router",
		"with prefill marked down, the router still sends the decode leg alone"},
	{BugAbortMissesQueues, "sgl-project/sglang#8177 (PR #8352)", "prefill, decode",
		"aborts miss the bootstrap/inflight/prealloc/transfer queues; the requests keep their KV pages"},
	{BugAbortStormOrphans, "sgl-project/sglang#26912", "prefill",
		"aborted requests are orphaned in prefill's bootstrap queue forever"},
	{BugBootstrapRetryEveryStep, "sgl-project/sglang PRs #19900, #20785", "decode",
		"an unreachable prefill bootstrap server is retried, blocking, on every decode step; decode freezes"},
	{BugStaleBootstrapEndpoint, "sgl-project/sglang#33789 (PR #36029)", "decode",
		"after prefill restarts behind the same bootstrap address, decode keeps its dead cached endpoint"},
	{BugTransferringNeverTimesOut, "sgl-project/sglang PR #31800", "decode",
		"a KV receiver stuck in Transferring never times out (the waiting timeout stops at the first frame)"},
	{BugBootstrapFreezeAtRate, "sgl-project/sglang#10110", "decode",
		"more rooms pending in decode's prealloc than its window holds: none registers, the pair freezes until the bootstrap timeout"},
	{BugAbortedPrefillGarbage, "sgl-project/sglang#30233", "decode",
		"decode generates from stale KV after prefill aborted the request; 200 with wrong text"},
	{BugPrefillAbortCacheLeak, "sgl-project/sglang PR #36926", "prefill",
		"a prefill request aborted during its forward step is never released: its pages and radix cache lock leak"},
}

// LookupBug returns the bug named name.
func LookupBug(name string) (BugInfo, error) {
	for _, b := range Bugs {
		if string(b.Name) == name {
			return b, nil
		}
	}
	names := make([]string, len(Bugs))
	for i, b := range Bugs {
		names[i] = string(b.Name)
	}
	return BugInfo{}, fmt.Errorf("scheduler: sglang bug %q is unknown (%s)", name, strings.Join(names, ", "))
}

// BugSet is the bugs switched on (--sglang-bug, repeatable). The zero value has none.
type BugSet []Bug

// Has reports whether b is on.
func (s BugSet) Has(b Bug) bool { return slices.Contains(s, b) }

// String is the comma-separated names (pflag).
func (s *BugSet) String() string {
	if s == nil {
		return ""
	}
	out := make([]string, len(*s))
	for i, b := range *s {
		out[i] = string(b)
	}
	return strings.Join(out, ",")
}

// Type is the flag's value type (pflag).
func (s *BugSet) Type() string { return "name" }

// Set adds one or more comma-separated names (pflag); an unknown name is an error.
func (s *BugSet) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if _, err := LookupBug(name); err != nil {
			// A flag value's error is shown as is: no package prefix.
			return errors.New(strings.TrimPrefix(err.Error(), "scheduler: "))
		}
		if !s.Has(Bug(name)) {
			*s = append(*s, Bug(name))
		}
	}
	return nil
}

// validate checks that every bug is known and that bugs come with sglang semantics.
func (s BugSet) validate(sem Semantics) []error {
	var errs []error
	for _, b := range s {
		if _, err := LookupBug(string(b)); err != nil {
			errs = append(errs, &LimitError{Flag: "--sglang-bug", Problem: fmt.Sprintf("%q is unknown", b)})
		}
	}
	for _, b := range s {
		if info, err := LookupBug(string(b)); err == nil && info.Role == "router" {
			errs = append(errs, &LimitError{Flag: "--sglang-bug", Problem: fmt.Sprintf("%s is a router bug; give it to the router", b)})
		}
	}
	if len(s) > 0 && sem != SemanticsSGLang {
		errs = append(errs, &LimitError{Flag: "--sglang-bug", Problem: fmt.Sprintf("needs --semantics sglang (got %s)", sem)})
	}
	return errs
}
