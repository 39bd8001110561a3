package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/gen"
	"pdsoak/server/kvpool"
	"pdsoak/server/radixcache"
)

// Stage names a queue a request sits in. The strings appear in /debug/requests and in
// gen.StageError.Stage.
type Stage string

// Stages.
const (
	StageBootstrap Stage = "bootstrap" // prefill: waiting for decode to register the room
	StagePrealloc  Stage = "prealloc"  // decode: waiting for KV pages
	StageTransfer  Stage = "transfer"  // decode: receiving KV from prefill
	StageWaiting   Stage = "waiting"   // waiting for a slot in the batch
	StageForward   Stage = "forward"   // prefill: in the forward batch
	StageInflight  Stage = "inflight"  // prefill: sending KV to decode
	StageRunning   Stage = "running"   // colocated, decode: in the running batch
	StageRetracted Stage = "retracted" // decode: pages taken back, waiting to recompute
	StageTotal     Stage = "total"     // the whole request's deadline (errors only)
	StageWatchdog  Stage = "watchdog"  // no progress anywhere (errors only)
)

// Config is the scheduler's configuration: the worker's Limits (validated by
// Limits.Validate; the scheduler applies the semantics' timeout defaults itself) and what
// the engine resolves from its backend.
type Config struct {
	Role Role
	// Limits.PageSize must be resolved (> 0) here: the engine takes the backend's when
	// --page-size is 0.
	Limits

	Pages int // KV pool capacity in pages

	VocabSize int // token ids must be in [0, VocabSize)
	EOS       int
}

// Validate reports every problem at once: the limits' and the backend-derived fields'.
func (c Config) Validate() error {
	errs := []error{c.Role.Validate(), c.Limits.Validate()}
	if c.Pages <= 0 {
		errs = append(errs, fmt.Errorf("scheduler: config: pages must be > 0 (got %d)", c.Pages))
	}
	if c.PageSize <= 0 {
		errs = append(errs, fmt.Errorf("scheduler: config: the page size must be resolved to > 0 (got %d)", c.PageSize))
	}
	if c.VocabSize <= 0 || c.EOS < 0 || c.EOS >= c.VocabSize {
		errs = append(errs, fmt.Errorf("scheduler: config: vocab %d / eos %d out of range", c.VocabSize, c.EOS))
	}
	return errors.Join(errs...)
}

// Emit is tokens to stream to a request's client.
type Emit struct {
	Seq    uint64
	ID     string
	Tokens []int
}

// Finish ends a request: Err nil with Reason "stop" or "length", or an error wrapping a
// gen sentinel (a *gen.StageError for bounds and transfer failures).
type Finish struct {
	Seq              uint64
	ID               string
	Stage            Stage // where the request was when it ended
	Reason           string
	Err              error
	PromptTokens     int
	CompletionTokens int
	Age              time.Duration
}

// Transfer asks the driver (decode) to register room with the prefill bootstrap server at
// Addr and receive the KV of the prompt's NumTokens tokens into Pages (exactly the pages
// that hold them).
type Transfer struct {
	Seq       uint64
	ID        string
	Room      uint64
	Addr      string
	Pages     []int32
	NumTokens int
}

// Send asks the driver (prefill) to push the KV of the prompt's NumTokens tokens, held in
// Pages, to decode, then FirstToken.
type Send struct {
	Seq        uint64
	ID         string
	Room       uint64
	Pages      []int32
	NumTokens  int
	FirstToken int
}

// Cancel asks the driver to abandon the transfer of room.
type Cancel struct {
	Seq  uint64
	ID   string
	Room uint64
}

// Move records a request's change of stage (the driver logs one line per move).
type Move struct {
	Seq      uint64
	ID       string
	From, To Stage
}

// Ready is the set of decisions since the previous call.
type Ready struct {
	// Batch is the forward step to run (nil: none). BatchSeqs[i] owns Batch[i]. The
	// driver must call StepDone before the next batch is planned.
	Batch         []kernels.SeqInput
	BatchSeqs     []uint64
	PrefillTokens int
	DecodeTokens  int

	Emits     []Emit
	Finished  []Finish
	Transfers []Transfer
	Sends     []Send
	Cancels   []Cancel
	Moves     []Move
	// Retracted lists the requests whose pages were taken back this round.
	Retracted []uint64
	// PagesFreed counts pages returned to the pool since the previous Ready.
	PagesFreed int
	// Stats is non-nil when gauges should be refreshed (always in strict semantics; in
	// SGLang semantics only after steps, and for decode every DecodeLogInterval steps).
	Stats *Stats
}

// Empty reports whether rd carries nothing to do.
func (rd *Ready) Empty() bool {
	return rd.Batch == nil && len(rd.Emits) == 0 && len(rd.Finished) == 0 && len(rd.Transfers) == 0 &&
		len(rd.Sends) == 0 && len(rd.Cancels) == 0 && len(rd.Moves) == 0 && rd.Stats == nil
}

// Stats are queue lengths and pool use.
type Stats struct {
	Running, Waiting, Bootstrap, Prealloc, Transfer, Inflight, Retracted int
	// Queued is every live request not running (what --max-queued-requests bounds in
	// strict semantics).
	Queued     int
	UsedPages  int
	TotalPages int
	PageSize   int
	// PendingRegistrations are rooms decode registered before prefill's leg arrived.
	PendingRegistrations int
	DecodeSteps          uint64
	// The prefix cache (zero without one): pages it holds, nodes live requests lock
	// (0 after a drain, else a leak), prompt tokens looked up and found cached, and
	// pages evicted. UsedPages leaves out the cached pages no request locks.
	CachedPages, LockedNodes           int
	CacheQueriedTokens, CacheHitTokens uint64
	EvictedPages                       uint64
	// GeneratedTokens counts every token sampled since start.
	GeneratedTokens uint64
}

type request struct {
	seq     uint64
	id      string
	req     *gen.Request
	tokens  []int // prompt then output
	nPrompt int
	cached  int // tokens whose KV is in pages
	inLen   int // tokens fed in the batch in flight
	// computed: every token but the last sampled one has KV (prefill done; next is decode)
	computed bool
	pages    []int32

	stage    Stage
	arrived  time.Time
	since    time.Time
	deadline time.Time // zero: none

	room            uint64
	pd              bool
	transferStarted bool
	inBatch         bool
	done            bool // finished while in the batch; pages freed at StepDone
	// orphan: finished, but left in the bootstrap queue (BugAbortStormOrphans only).
	orphan bool
	// aborted: finished by an abort or a timeout (BugPrefillAbortCacheLeak).
	aborted bool

	// The prefix cache (prefix.go): the locked match whose pages lead r.pages, the
	// cached prefix length it started from, and whether the hit rate counted it.
	match        radixcache.Match
	prefix       int
	countedCache bool
}

func (r *request) output() int { return len(r.tokens) - r.nPrompt }

// Scheduler is the state machine. Not safe for concurrent use.
type Scheduler struct {
	cfg    Config
	bounds Bounds // the timeouts in force
	pool   *kvpool.Pool

	nextSeq uint64
	reqs    map[uint64]*request
	rooms   map[uint64]*request
	regs    map[uint64]time.Time // prefill: registrations waiting for their leg

	bootstrap, prealloc, transfer, waiting, running, inflight, retracted []*request

	batch      []*request
	batchStart time.Time

	lastProgress time.Time
	lastOutput   time.Time
	watchdogErr  error
	started      bool

	decodeSteps     uint64
	generated       uint64
	statsDue        bool
	kvBlocked       int // requests the last plan could not give pages to
	scratch         []*request
	out             Ready
	timeoutsByStage map[Stage]uint64

	cache                  *radixcache.Cache // nil: no prefix cache (prefix.go)
	cacheQueried, cacheHit uint64            // prompt tokens looked up, and found cached
}

// New builds a scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg: cfg, bounds: cfg.Bounds(), pool: kvpool.New(cfg.Pages),
		reqs: map[uint64]*request{}, rooms: map[uint64]*request{}, regs: map[uint64]time.Time{},
		statsDue: true, timeoutsByStage: map[Stage]uint64{}, cache: newCache(cfg),
	}, nil
}

// Config returns the configuration.
func (s *Scheduler) Config() Config { return s.cfg }

func (s *Scheduler) strict() bool { return s.cfg.Semantics == SemanticsStrict }

func (s *Scheduler) pagesFor(tokens int) int { return kvpool.PagesFor(tokens, s.cfg.PageSize) }

func (s *Scheduler) runLimit() int {
	n := s.cfg.MaxRunningRequests
	if s.cfg.CudaGraphMaxBS > 0 && s.cfg.CudaGraphMaxBS < n {
		n = s.cfg.CudaGraphMaxBS
	}
	return n
}

func (s *Scheduler) touch(now time.Time) {
	if !s.started {
		s.started = true
		s.lastProgress = now
	}
}

func (s *Scheduler) progress(now time.Time) {
	s.lastProgress = now
	s.watchdogErr = nil
	s.statsDue = true
}

// queued counts live requests not running.
func (s *Scheduler) queued() int {
	return len(s.bootstrap) + len(s.prealloc) + len(s.transfer) + len(s.waiting) + len(s.inflight) + len(s.retracted)
}

func (s *Scheduler) queue(st Stage) *[]*request {
	switch st {
	case StageBootstrap:
		return &s.bootstrap
	case StagePrealloc:
		return &s.prealloc
	case StageTransfer:
		return &s.transfer
	case StageWaiting:
		return &s.waiting
	case StageRunning, StageForward:
		return &s.running
	case StageInflight:
		return &s.inflight
	case StageRetracted:
		return &s.retracted
	}
	return nil
}

func (s *Scheduler) remove(r *request) {
	q := s.queue(r.stage)
	if q == nil {
		return
	}
	if i := slices.Index(*q, r); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
	}
}

// moveTo takes r out of its queue and appends it to the queue of st (front when front).
func (s *Scheduler) moveTo(now time.Time, r *request, st Stage, front bool) {
	from := r.stage
	s.remove(r)
	r.stage, r.since = st, now
	q := s.queue(st)
	if front {
		*q = slices.Insert(*q, 0, r)
	} else {
		*q = append(*q, r)
	}
	s.out.Moves = append(s.out.Moves, Move{Seq: r.seq, ID: r.id, From: from, To: st})
	s.statsDue = true
}

// Arrive admits req, or refuses it with an error wrapping gen.ErrInvalid,
// gen.ErrContextLength or a *gen.OverloadError. It returns the request's sequence
// number, which names it in every later decision.
func (s *Scheduler) Arrive(now time.Time, req *gen.Request) (uint64, error) {
	s.touch(now)
	if err := s.admissible(req); err != nil {
		return 0, err
	}
	if len(s.reqs) == 0 {
		s.lastProgress = now // the stall clock starts when work appears
	}
	s.nextSeq++
	r := &request{
		seq: s.nextSeq, id: req.ID, req: req,
		tokens: append(make([]int, 0, len(req.Prompt)+min(req.MaxTokens, 4096)), req.Prompt...), nPrompt: len(req.Prompt),
		arrived: now, since: now,
	}
	if s.bounds.Request > 0 {
		r.deadline = now.Add(s.bounds.Request)
	}
	if s.strict() && !req.Deadline.IsZero() && (r.deadline.IsZero() || req.Deadline.Before(r.deadline)) {
		r.deadline = req.Deadline
	}
	s.reqs[r.seq] = r
	switch s.cfg.Role {
	case RoleColocated:
		r.stage = StageWaiting
	case RolePrefill:
		r.pd, r.room = true, req.Bootstrap.Room
		s.rooms[r.room] = r
		r.stage = StageBootstrap
	case RoleDecode:
		if req.DecodeOnly {
			// A router's --pd-fallback decode-only: no prefill worker computed this
			// prompt, so decode does, as a colocated worker would.
			r.stage = StageWaiting
			break
		}
		r.pd, r.room = true, req.Bootstrap.Room
		s.rooms[r.room] = r
		r.stage = StagePrealloc
	}
	*s.queue(r.stage) = append(*s.queue(r.stage), r)
	s.out.Moves = append(s.out.Moves, Move{Seq: r.seq, ID: r.id, From: "", To: r.stage})
	s.statsDue = true
	if s.cfg.Role == RolePrefill {
		if _, ok := s.regs[r.room]; ok {
			delete(s.regs, r.room)
			s.moveTo(now, r, StageWaiting, false)
		}
	}
	return r.seq, nil
}

func (s *Scheduler) admissible(req *gen.Request) error {
	if req == nil || len(req.Prompt) == 0 {
		return fmt.Errorf("scheduler: empty prompt: %w", gen.ErrInvalid)
	}
	if req.MaxTokens <= 0 {
		return fmt.Errorf("scheduler: max_tokens must be > 0 (got %d): %w", req.MaxTokens, gen.ErrInvalid)
	}
	for _, t := range req.Prompt {
		if t < 0 || t >= s.cfg.VocabSize {
			return fmt.Errorf("scheduler: token id %d outside the vocabulary [0,%d): %w", t, s.cfg.VocabSize, gen.ErrInvalid)
		}
	}
	if n := len(req.Prompt) + req.MaxTokens; n > s.cfg.ContextLength || n < 0 {
		return fmt.Errorf("scheduler: prompt (%d tokens) + max_tokens (%d) exceeds the context length %d: %w",
			len(req.Prompt), req.MaxTokens, s.cfg.ContextLength, gen.ErrContextLength)
	}
	if req.DecodeOnly && (s.cfg.Role != RoleDecode || req.Bootstrap != nil) {
		return fmt.Errorf("scheduler: decode_only is for a decode worker and a request without a bootstrap room (%s worker): %w", s.cfg.Role, gen.ErrInvalid)
	}
	if s.cfg.Role != RoleColocated && !req.DecodeOnly {
		if req.Bootstrap == nil {
			return fmt.Errorf("scheduler: %s worker needs a bootstrap room: %w", s.cfg.Role, gen.ErrInvalid)
		}
		if _, dup := s.rooms[req.Bootstrap.Room]; dup {
			return fmt.Errorf("scheduler: bootstrap room %d is already in use: %w", req.Bootstrap.Room, gen.ErrInvalid)
		}
		if s.cfg.Role == RoleDecode && req.Bootstrap.Addr == "" {
			return fmt.Errorf("scheduler: decode worker needs a bootstrap address: %w", gen.ErrInvalid)
		}
	}
	// A request whose KV can never fit the pool would wedge (SGLang decode lets it).
	need := len(req.Prompt) + req.MaxTokens
	if s.cfg.Role == RolePrefill {
		need = len(req.Prompt)
	}
	if (s.strict() || s.cfg.Role != RoleDecode) && s.pagesFor(need) > s.cfg.Pages {
		return fmt.Errorf("scheduler: request needs %d KV pages, the pool has %d: %w",
			s.pagesFor(need), s.cfg.Pages, gen.ErrContextLength)
	}
	if s.strict() && s.kvBlocked > 0 {
		// Requests already wait for KV pages that are not free: refuse now (503 with
		// Retry-After) rather than let this one age in a queue it cannot leave.
		return &gen.OverloadError{RetryAfter: s.cfg.RetryAfter,
			Reason: fmt.Sprintf("scheduler: KV pool exhausted: %s waiting for pages, %d of %d free",
				plural(s.kvBlocked, "request"), s.pool.FreePages(), s.cfg.Pages)}
	}
	if s.cfg.MaxQueuedRequests > 0 && (s.strict() || s.cfg.Role == RoleColocated) {
		if q := s.queued(); q >= s.cfg.MaxQueuedRequests {
			return &gen.OverloadError{RetryAfter: s.cfg.RetryAfter,
				Reason: fmt.Sprintf("scheduler: %s queued (--max-queued-requests %d)", plural(q, "request"), s.cfg.MaxQueuedRequests)}
		}
	}
	return nil
}

// finish ends r. Pages are freed now, or at StepDone when r is in the running batch.
func (s *Scheduler) finish(now time.Time, r *request, reason string, err error) {
	if r.done {
		return
	}
	f := Finish{Seq: r.seq, ID: r.id, Stage: r.stage, Reason: reason, Err: err,
		PromptTokens: r.nPrompt, CompletionTokens: r.output(), Age: now.Sub(r.arrived)}
	if s.cfg.Role == RolePrefill {
		f.CompletionTokens = 0
	}
	s.out.Finished = append(s.out.Finished, f)
	// SGLang ends a timed-out request as an abort too (FINISH_ABORT).
	r.aborted = errors.Is(err, gen.ErrAborted) || errors.Is(err, gen.ErrTimeout)
	// BugAbortMissesQueues: an abort that reaches a prefill request in the waiting queue
	// pops it without telling the KV sender, so decode is never told either.
	missed := s.cfg.Role == RolePrefill && s.cfg.Bug(BugAbortMissesQueues) && errors.Is(err, gen.ErrAborted)
	if err != nil && !missed && r.pd && (s.cfg.Role == RolePrefill || r.transferStarted) &&
		(r.stage == StageBootstrap || r.stage == StageWaiting || r.stage == StageForward || r.stage == StageInflight || r.stage == StageTransfer) {
		s.out.Cancels = append(s.out.Cancels, Cancel{Seq: r.seq, ID: r.id, Room: r.room})
	}
	var se *gen.StageError
	if errors.As(err, &se) && errors.Is(err, gen.ErrTimeout) {
		s.timeoutsByStage[Stage(se.Stage)]++
	}
	s.remove(r)
	s.out.Moves = append(s.out.Moves, Move{Seq: r.seq, ID: r.id, From: r.stage, To: ""})
	if r.pd {
		delete(s.rooms, r.room)
	}
	delete(s.reqs, r.seq)
	s.statsDue = true
	if r.inBatch {
		r.done = true
		return
	}
	s.release(r)
}

func (s *Scheduler) release(r *request) {
	if len(r.pages) == 0 {
		return
	}
	own := s.releaseCached(r)
	if err := s.pool.Free(kvpool.Owner(r.seq), own); err != nil {
		panic(fmt.Sprintf("scheduler: request %s: %v", r.id, err)) // a bookkeeping bug, never input
	}
	s.out.PagesFreed += len(own)
	r.pages = nil
	r.cached = 0
	r.computed = false
}

// Abort ends a live request with cause (an error wrapping gen.ErrAborted or similar).
// It reports whether the request was live.
func (s *Scheduler) Abort(now time.Time, seq uint64, cause error) bool {
	r, ok := s.reqs[seq]
	if !ok {
		return false
	}
	if cause == nil {
		cause = fmt.Errorf("scheduler: aborted: %w", gen.ErrAborted)
	}
	if s.abortMissed(r) {
		return true
	}
	s.finish(now, r, "", cause)
	if s.cfg.Role == RolePrefill && r.stage == StageBootstrap && s.cfg.Bug(BugAbortStormOrphans) {
		// sglang#26912: the aborted request is answered but stays in the bootstrap
		// queue, never popped and never expired.
		r.orphan = true
		s.bootstrap = append(s.bootstrap, r)
	}
	return true
}

// abortMissed reports whether an abort does not reach r (BugAbortMissesQueues: before
// sglang PR #8352, abort_request looked only at the waiting queue and the running
// batch, not at the disaggregation queues). r then stays where it is, with its pages.
func (s *Scheduler) abortMissed(r *request) bool {
	if !s.cfg.Bug(BugAbortMissesQueues) {
		return false
	}
	switch r.stage {
	case StageBootstrap, StageInflight, StagePrealloc, StageTransfer:
		return true
	}
	return false
}

// AbortAll ends every live request with cause (shutdown).
func (s *Scheduler) AbortAll(now time.Time, cause error) int {
	seqs := make([]uint64, 0, len(s.reqs))
	for seq := range s.reqs {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		s.Abort(now, seq, cause)
	}
	return len(seqs)
}
