package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MaxPageSize is the largest --page-size a worker accepts.
const MaxPageSize = 4096

// Limits are the bounds of one worker, named after SGLang's flags (MaxQueuedRequests is
// --max-queued-requests, and so on). The CLI maps its flags onto them and calls Validate
// once; the engine and the scheduler take a validated value and check nothing again.
//
// Timeouts: 0 means the default of the Semantics, a negative value means off (see
// Bounds). Strict defaults: bootstrap 30s, prealloc 30s, transfer 15s, waiting 60s,
// running off, total 300s, watchdog 30s. SGLang defaults: bootstrap 300s counted from
// arrival, every other stage off, watchdog 300s and only while a batch runs;
// PreallocTimeout and TransferTimeout do not exist in SGLang and are ignored there.
type Limits struct {
	// Semantics (--semantics) selects strict invariants or SGLang's PD behaviour, and
	// with it the defaults of the timeouts.
	Semantics Semantics

	// MaxQueuedRequests (--max-queued-requests) bounds the requests admitted but not
	// running. 0: no limit. Strict counts every queue of every role; SGLang semantics
	// ignore the limit in the prefill and decode roles. Strict semantics also refuse new
	// requests while queued ones wait for KV pages that are not free, and requests whose
	// KV could never fit the pool (gen.ErrContextLength).
	MaxQueuedRequests int
	// MaxRunningRequests (--max-running-requests) bounds the running batch.
	MaxRunningRequests int
	// CudaGraphMaxBS (--cuda-graph-max-bs) caps the decode batch (0: no cap); the running
	// batch is capped at min(MaxRunningRequests, CudaGraphMaxBS).
	CudaGraphMaxBS int
	// ContextLength (--context-length): prompt + max_tokens above it is refused.
	ContextLength int
	// MaxPrefillTokens (--max-prefill-tokens) bounds the new prompt tokens admitted into
	// one step (a longer prompt still runs, alone).
	MaxPrefillTokens int
	// ChunkedPrefillSize (--chunked-prefill-size), when > 0, prefills longer prompts in
	// chunks of this many tokens across steps, so running decodes are not held up.
	ChunkedPrefillSize int

	// PageSize (--page-size) in tokens; 0 takes the backend's. The scheduler needs it
	// resolved (> 0).
	PageSize int
	// MaxTotalTokens (--max-total-tokens) sizes the KV pool in tokens. When it is 0,
	// MemFractionStatic (--mem-fraction-static) × DeviceMemoryGB (--device-memory-gb) ÷
	// KV bytes per token does; when both are 0 the pool is the backend's whole KV store.
	MaxTotalTokens    int
	MemFractionStatic float64
	DeviceMemoryGB    float64

	WatchdogTimeout  time.Duration // --watchdog-timeout: no progress anywhere
	BootstrapTimeout time.Duration // --bootstrap-timeout: prefill waiting for decode to register the room
	PreallocTimeout  time.Duration // --prealloc-timeout: decode waiting for KV pages
	TransferTimeout  time.Duration // --transfer-timeout: decode receiving KV; prefill sending it
	WaitingTimeout   time.Duration // --waiting-timeout: the waiting queue
	RunningTimeout   time.Duration // --running-timeout: the running batch
	RequestTimeout   time.Duration // --request-timeout: the whole request (a request's own Deadline may be earlier)

	// RetryAfter (--retry-after) is the hint sent with an overload refusal.
	RetryAfter time.Duration
	// ReservedDecodeTokens (SGLANG_NUM_RESERVED_DECODE_TOKENS) is the headroom the SGLang
	// decode prealloc keeps per queued request; used only in SGLang semantics.
	ReservedDecodeTokens int
	// DecodeLogInterval (--decode-log-interval) is how many decode steps pass between
	// gauge refreshes of a decode worker in SGLang semantics.
	DecodeLogInterval int

	// RadixCache keeps finished requests' KV pages in a radix tree and reuses the longest
	// cached prefix of new prompts (prefill and colocated workers); on by default as in
	// SGLang, off with --disable-radix-cache.
	RadixCache bool

	// SGLangBugs (--sglang-bug) switch on reproductions of upstream SGLang PD bugs (see
	// Bug); valid only with SemanticsSGLang.
	SGLangBugs BugSet
}

// DefaultLimits are a worker's limits when no flag changes them.
func DefaultLimits() Limits {
	return Limits{
		Semantics:            SemanticsStrict,
		MaxQueuedRequests:    1024,
		MaxRunningRequests:   64,
		ContextLength:        8192,
		MaxPrefillTokens:     16384,
		ChunkedPrefillSize:   8192,
		MemFractionStatic:    0.83,
		RetryAfter:           time.Second,
		ReservedDecodeTokens: 512,
		DecodeLogInterval:    40,
		RadixCache:           true,
	}
}

// LimitError is one bad limit, named by the flag (or environment variable) that sets it,
// so a command line can show it as is.
type LimitError struct {
	Flag    string // "--max-running-requests"
	Problem string // "must be > 0 (got 0)"
}

// Error is the problem with the package prefix; Flag + " " + Problem is the user's view.
func (e *LimitError) Error() string { return "scheduler: " + e.Flag + " " + e.Problem }

// Validate reports every problem at once, each a *LimitError joined with errors.Join.
func (l Limits) Validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, &LimitError{Flag: flag, Problem: fmt.Sprintf(format, args...)})
	}
	if !slices.Contains(SemanticsNames(), string(l.Semantics)) {
		bad("--semantics", "%q is unknown (%s)", l.Semantics, strings.Join(SemanticsNames(), ", "))
	}
	if l.MaxQueuedRequests < 0 {
		bad("--max-queued-requests", "must be >= 0 (got %d)", l.MaxQueuedRequests)
	}
	if l.MaxRunningRequests <= 0 {
		bad("--max-running-requests", "must be > 0 (got %d)", l.MaxRunningRequests)
	}
	if l.CudaGraphMaxBS < 0 {
		bad("--cuda-graph-max-bs", "must be >= 0 (got %d)", l.CudaGraphMaxBS)
	}
	if l.ContextLength <= 1 {
		bad("--context-length", "must be > 1 (got %d)", l.ContextLength)
	}
	if l.MaxPrefillTokens <= 0 {
		bad("--max-prefill-tokens", "must be > 0 (got %d)", l.MaxPrefillTokens)
	}
	if l.ChunkedPrefillSize < 0 {
		bad("--chunked-prefill-size", "must be >= 0 (got %d)", l.ChunkedPrefillSize)
	}
	if l.PageSize < 0 || l.PageSize > MaxPageSize {
		bad("--page-size", "must be in [0, %d] (got %d)", MaxPageSize, l.PageSize)
	}
	if l.MaxTotalTokens < 0 {
		bad("--max-total-tokens", "must be >= 0 (got %d)", l.MaxTotalTokens)
	} else if l.MaxTotalTokens > 0 && l.PageSize > 0 && l.MaxTotalTokens < l.PageSize {
		bad("--max-total-tokens", "%d is less than one page of %d tokens (--page-size)", l.MaxTotalTokens, l.PageSize)
	}
	if !(l.MemFractionStatic > 0 && l.MemFractionStatic <= 1) {
		bad("--mem-fraction-static", "must be in (0, 1] (got %v)", l.MemFractionStatic)
	}
	if l.DeviceMemoryGB < 0 || math.IsNaN(l.DeviceMemoryGB) || math.IsInf(l.DeviceMemoryGB, 0) {
		bad("--device-memory-gb", "must be a finite number >= 0 (got %v)", l.DeviceMemoryGB)
	}
	if l.RetryAfter < 0 {
		bad("--retry-after", "must be >= 0 (got %s)", l.RetryAfter)
	}
	if l.ReservedDecodeTokens < 0 {
		bad("SGLANG_NUM_RESERVED_DECODE_TOKENS", "must be >= 0 (got %d)", l.ReservedDecodeTokens)
	}
	if l.DecodeLogInterval < 0 {
		bad("--decode-log-interval", "must be >= 0 (got %d)", l.DecodeLogInterval)
	}
	errs = append(errs, l.SGLangBugs.validate(l.Semantics)...)
	return errors.Join(errs...)
}

// Bug reports whether the upstream bug b is switched on (only ever in SGLang semantics).
func (l Limits) Bug(b Bug) bool { return l.Semantics == SemanticsSGLang && l.SGLangBugs.Has(b) }

// Bounds are the timeouts in force once the semantics' defaults are applied; 0 means no
// bound.
type Bounds struct {
	Bootstrap, Prealloc, Transfer, Waiting, Running, Request, Watchdog time.Duration
}

// pick applies the convention of Limits: 0 takes def, a negative value is off.
func pick(v, def time.Duration) time.Duration {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// Bounds resolves the timeouts of l for its Semantics.
func (l Limits) Bounds() Bounds {
	if l.Semantics == SemanticsSGLang {
		return Bounds{
			Bootstrap: pick(l.BootstrapTimeout, 300*time.Second),
			Waiting:   pick(l.WaitingTimeout, 0),
			Running:   pick(l.RunningTimeout, 0),
			Request:   pick(l.RequestTimeout, 0),
			Watchdog:  pick(l.WatchdogTimeout, 300*time.Second),
		}
	}
	return Bounds{
		Bootstrap: pick(l.BootstrapTimeout, 30*time.Second),
		Prealloc:  pick(l.PreallocTimeout, 30*time.Second),
		Transfer:  pick(l.TransferTimeout, 15*time.Second),
		Waiting:   pick(l.WaitingTimeout, 60*time.Second),
		Running:   pick(l.RunningTimeout, 0),
		Request:   pick(l.RequestTimeout, 300*time.Second),
		Watchdog:  pick(l.WatchdogTimeout, 30*time.Second),
	}
}

// Validate reports whether r is one of the three roles.
func (r Role) Validate() error {
	switch r {
	case RoleColocated, RolePrefill, RoleDecode:
		return nil
	}
	return fmt.Errorf("scheduler: role %q is unknown (colocated, prefill, decode)", r)
}
