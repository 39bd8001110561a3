package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/gen"
	"pdsoak/server/kvpool"
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
}

// New builds a scheduler.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Scheduler{
		cfg: cfg, bounds: cfg.Bounds(), pool: kvpool.New(cfg.Pages),
		reqs: map[uint64]*request{}, rooms: map[uint64]*request{}, regs: map[uint64]time.Time{},
		statsDue: true, timeoutsByStage: map[Stage]uint64{},
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
	if err := s.pool.Free(kvpool.Owner(r.seq), r.pages); err != nil {
		panic(fmt.Sprintf("scheduler: request %s: %v", r.id, err)) // a bookkeeping bug, never input
	}
	s.out.PagesFreed += len(r.pages)
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

// Registered (prefill): decode registered room. The leg may not have arrived yet.
func (s *Scheduler) Registered(now time.Time, room uint64) {
	s.touch(now)
	r, ok := s.rooms[room]
	if !ok {
		s.regs[room] = now
		return
	}
	if r.stage == StageBootstrap {
		s.moveTo(now, r, StageWaiting, false)
		s.progress(now)
	}
}

// Received (decode): the KV of room arrived (err nil) with the first token prefill
// sampled, or the transfer failed. It reports whether a request was waiting for it.
func (s *Scheduler) Received(now time.Time, room uint64, firstToken int, err error) bool {
	r, ok := s.rooms[room]
	if !ok || r.stage != StageTransfer || s.cfg.Role != RoleDecode {
		return false
	}
	s.progress(now)
	if err != nil && s.cfg.Bug(BugAbortedPrefillGarbage) {
		// sglang#30233: prefill aborted the request, yet decode carries on as if its KV
		// had arrived, from whatever its pages hold, with the prompt's last token as the
		// "first token" prefill never sampled.
		firstToken, err = r.tokens[r.nPrompt-1], nil
	}
	if err == nil && (firstToken < 0 || firstToken >= s.cfg.VocabSize) {
		err = fmt.Errorf("first token %d outside the vocabulary", firstToken)
	}
	if err != nil {
		s.finish(now, r, "", &gen.StageError{Stage: string(StageTransfer),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	r.cached, r.computed = r.nPrompt, true
	s.moveTo(now, r, StageWaiting, false)
	s.sampled(now, r, firstToken)
	return true
}

// Sent (prefill): the KV of room reached decode (err nil) or the send failed. An error
// for a request not yet sending (decode abandoned the room) ends it too.
func (s *Scheduler) Sent(now time.Time, room uint64, err error) bool {
	r, ok := s.rooms[room]
	if !ok || s.cfg.Role != RolePrefill {
		return false
	}
	if r.stage != StageInflight {
		// Decode gave the room up before prefill sent anything (abort, timeout): stop
		// working on it now instead of computing KV nobody will take (I6).
		if err == nil || r.stage == StageTransfer {
			return false
		}
		s.finish(now, r, "", &gen.StageError{Stage: string(r.stage),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	s.progress(now)
	if err != nil {
		s.finish(now, r, "", &gen.StageError{Stage: string(StageTransfer),
			Err: fmt.Errorf("scheduler: room %d: %w: %v", room, gen.ErrTransfer, err)})
		return true
	}
	reason := "length"
	if r.output() > 0 && r.tokens[len(r.tokens)-1] == s.cfg.EOS && !r.req.IgnoreEOS {
		reason = "stop"
	}
	s.finish(now, r, reason, nil)
	return true
}

// sampled appends tok to r's output, emits it and finishes r when it is done.
func (s *Scheduler) sampled(now time.Time, r *request, tok int) {
	s.sampledInto(now, r, tok, nil)
}

// sampledInto is sampled with the emitted slice carved out of buf when it has room (one
// allocation per step instead of one per request).
func (s *Scheduler) sampledInto(now time.Time, r *request, tok int, buf *[]int) {
	r.tokens = append(r.tokens, tok)
	s.generated++
	s.lastOutput = now
	if tok == s.cfg.EOS && !r.req.IgnoreEOS {
		s.finish(now, r, "stop", nil)
		return
	}
	var toks []int
	if buf != nil && cap(*buf) > len(*buf) {
		*buf = append(*buf, tok)
		n := len(*buf)
		toks = (*buf)[n-1 : n : n]
	} else {
		toks = []int{tok}
	}
	s.out.Emits = append(s.out.Emits, Emit{Seq: r.seq, ID: r.id, Tokens: toks})
	if r.output() >= r.req.MaxTokens {
		s.finish(now, r, "length", nil)
	}
}

// StepDone applies the result of the batch planned by the last Ready: out[i] is the
// token sampled for Batch[i]. A non-nil err fails every request of the batch with
// gen.ErrInternal.
func (s *Scheduler) StepDone(now time.Time, out []int, err error) {
	batch := s.batch
	s.batch = nil
	if batch == nil {
		return
	}
	s.progress(now)
	if err == nil && len(out) != len(batch) {
		err = fmt.Errorf("backend returned %d tokens for a batch of %d", len(out), len(batch))
	}
	decode := false
	buf := make([]int, 0, len(batch))
	s.out.Emits = slices.Grow(s.out.Emits, len(batch))
	for i, r := range batch {
		r.inBatch = false
		if r.done {
			s.release(r)
			continue
		}
		if err != nil {
			s.finish(now, r, "", &gen.StageError{Stage: string(r.stage), Err: fmt.Errorf("scheduler: forward: %w: %v", gen.ErrInternal, err)})
			continue
		}
		if r.isDecode() {
			decode = true
		}
		if r.cached+r.inLen < len(r.tokens) { // a chunk of a chunked prefill: nothing sampled
			r.cached += r.inLen
			continue
		}
		r.cached, r.computed = len(r.tokens), true
		tok := out[i]
		if tok < 0 || tok >= s.cfg.VocabSize {
			s.finish(now, r, "", &gen.StageError{Stage: string(r.stage), Err: fmt.Errorf("scheduler: backend sampled token %d: %w", tok, gen.ErrInternal)})
			continue
		}
		if s.cfg.Role == RolePrefill {
			r.tokens = append(r.tokens, tok)
			s.generated++
			s.lastOutput = now
			s.moveTo(now, r, StageInflight, false)
			s.out.Sends = append(s.out.Sends, Send{Seq: r.seq, ID: r.id, Room: r.room, Pages: slices.Clone(r.pages),
				NumTokens: r.nPrompt, FirstToken: tok})
			continue
		}
		s.sampledInto(now, r, tok, &buf)
	}
	if decode {
		s.decodeSteps++
	}
	if !s.strict() && (s.cfg.Role != RoleDecode || s.cfg.DecodeLogInterval <= 1 ||
		(decode && s.decodeSteps%uint64(s.cfg.DecodeLogInterval) == 0)) {
		st := s.Stats()
		s.out.Stats = &st
	}
}

// Tick expires stage bounds and deadlines, and runs the watchdog.
func (s *Scheduler) Tick(now time.Time) {
	s.touch(now)
	var expired []*request
	var stages []Stage
	for _, r := range s.liveInQueueOrder() {
		if r.orphan {
			continue // BugAbortStormOrphans: nothing ever looks at it again
		}
		if !r.deadline.IsZero() && !now.Before(r.deadline) {
			// In a batch too (a stalled step): its pages are freed when the step ends.
			expired, stages = append(expired, r), append(stages, StageTotal)
			continue
		}
		if r.inBatch {
			continue
		}
		if b := s.bound(r.stage); b > 0 {
			start := r.since
			if r.stage == StageBootstrap {
				start = r.arrived // SGLang counts bootstrap from arrival; so does strict
			}
			if now.Sub(start) >= b {
				expired, stages = append(expired, r), append(stages, r.stage)
			}
		}
	}
	for i, r := range expired {
		st := stages[i]
		if st == StageRetracted {
			st = StageWaiting
		}
		age := now.Sub(r.since)
		if st == StageTotal || st == StageBootstrap {
			age = now.Sub(r.arrived)
		}
		s.finish(now, r, "", &gen.StageError{Stage: string(st),
			Err: fmt.Errorf("scheduler: %s bound expired after %s: %w", st, age.Round(time.Millisecond), gen.ErrTimeout)})
	}
	// Registrations whose leg never came.
	keep := s.bounds.Bootstrap
	if keep <= 0 {
		keep = 5 * time.Minute
	}
	for room, t := range s.regs {
		if now.Sub(t) >= keep {
			delete(s.regs, room)
		}
	}
	s.watchdog(now)
}

func (s *Scheduler) bound(st Stage) time.Duration {
	switch st {
	case StageBootstrap:
		return s.bounds.Bootstrap
	case StagePrealloc:
		if s.strict() {
			return s.bounds.Prealloc
		}
	case StageTransfer, StageInflight:
		if s.strict() {
			return s.bounds.Transfer
		}
	case StageWaiting, StageRetracted:
		return s.bounds.Waiting
	case StageRunning:
		return s.bounds.Running
	}
	return 0
}

func (s *Scheduler) watchdog(now time.Time) {
	wd := s.bounds.Watchdog
	if wd <= 0 || !s.strict() {
		return
	}
	if len(s.reqs) == 0 {
		if s.watchdogErr != nil && s.batch == nil && now.Sub(s.lastProgress) >= 2*wd {
			s.watchdogErr = nil
		}
		return
	}
	if now.Sub(s.lastProgress) < wd {
		return
	}
	// Nothing moved for the watchdog timeout: fail every request, including those of a
	// step that never came back (their pages are freed when it does).
	stuck := s.sortedLive()
	s.watchdogErr = fmt.Errorf("scheduler: watchdog: no progress for %s with %s in flight (%d queued); failed them",
		now.Sub(s.lastProgress).Round(time.Millisecond), plural(len(stuck), "request"), s.queued())
	for _, r := range stuck {
		s.finish(now, r, "", &gen.StageError{Stage: string(r.stage),
			Err: fmt.Errorf("scheduler: watchdog: no progress for %s: %w", wd, gen.ErrTimeout)})
	}
}

// Health returns nil, or why the worker must report unhealthy: in strict semantics,
// work queued and no progress for WatchdogTimeout (and until progress resumes after the
// watchdog fired); in SGLang semantics only a batch running longer than the watchdog
// without output.
func (s *Scheduler) Health(now time.Time) error {
	wd := s.bounds.Watchdog
	if wd <= 0 {
		return nil
	}
	if !s.strict() {
		if s.batch != nil && now.Sub(s.batchStart) >= wd && now.Sub(s.lastOutput) >= wd {
			return fmt.Errorf("scheduler: batch running for %s", now.Sub(s.batchStart).Round(time.Millisecond))
		}
		return nil
	}
	if len(s.reqs) > 0 && now.Sub(s.lastProgress) >= wd {
		return fmt.Errorf("scheduler: no progress for %s with %s in flight",
			now.Sub(s.lastProgress).Round(time.Millisecond), plural(len(s.reqs), "request"))
	}
	if s.batch != nil && now.Sub(s.batchStart) >= wd {
		return fmt.Errorf("scheduler: a step has not returned for %s", now.Sub(s.batchStart).Round(time.Millisecond))
	}
	return s.watchdogErr
}

// liveInQueueOrder lists live requests by queue, each queue in its order. It allocates
// only the returned slice, which is reused between calls.
func (s *Scheduler) liveInQueueOrder() []*request {
	out := s.scratch[:0]
	for _, q := range [][]*request{s.bootstrap, s.prealloc, s.transfer, s.waiting, s.running, s.inflight, s.retracted} {
		out = append(out, q...)
	}
	s.scratch = out
	return out
}

func (s *Scheduler) sortedLive() []*request {
	out := make([]*request, 0, len(s.reqs))
	for _, r := range s.reqs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *request) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// Stats returns the current queue lengths and pool use.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Running: len(s.running), Waiting: len(s.waiting), Bootstrap: len(s.bootstrap),
		Prealloc: len(s.prealloc), Transfer: len(s.transfer), Inflight: len(s.inflight),
		Retracted: len(s.retracted), Queued: s.queued(),
		UsedPages: s.pool.UsedPages(), TotalPages: s.pool.Capacity(), PageSize: s.cfg.PageSize,
		PendingRegistrations: len(s.regs), DecodeSteps: s.decodeSteps, GeneratedTokens: s.generated,
	}
}

// Timeouts returns how many requests each stage bound expired, by stage.
func (s *Scheduler) Timeouts() map[Stage]uint64 {
	out := make(map[Stage]uint64, len(s.timeoutsByStage))
	for k, v := range s.timeoutsByStage {
		out[k] = v
	}
	return out
}

// Live is the number of requests not yet finished.
func (s *Scheduler) Live() int { return len(s.reqs) }

// BatchInFlight reports whether a planned batch awaits StepDone.
func (s *Scheduler) BatchInFlight() bool { return s.batch != nil }

// Requests describes every live request, oldest first.
func (s *Scheduler) Requests(now time.Time) []gen.RequestInfo {
	live := s.sortedLive()
	out := make([]gen.RequestInfo, 0, len(live))
	for _, r := range live {
		ri := gen.RequestInfo{ID: r.id, Stage: string(r.stage),
			AgeSeconds: now.Sub(r.arrived).Seconds(), StageAgeSeconds: now.Sub(r.since).Seconds(),
			PromptTokens: r.nPrompt, OutputTokens: r.output(), Pages: len(r.pages)}
		if s.cfg.Role == RolePrefill {
			ri.OutputTokens = 0
		}
		if r.pd {
			room := r.room
			ri.Room = &room
		}
		out = append(out, ri)
	}
	return out
}

// LastProgress is when something last moved forward (a step, a transfer, a stage
// change out of a wait), or when work appeared after an idle period.
func (s *Scheduler) LastProgress() time.Time { return s.lastProgress }

// LastOutput is when a token was last sampled or received.
func (s *Scheduler) LastOutput() time.Time { return s.lastOutput }

// plural is "1 request", "2 requests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
