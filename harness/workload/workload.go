package workload

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/chaos"
	"pdsoak/harness/client"
	"pdsoak/scenarios"
)

// Req is one request a workload asks the Sender to run.
type Req struct {
	client.Request
	Workload string
	Session  int // 1-based (agents), 0 otherwise
	Turn     int // 1-based (agents), 0 otherwise
	// PromptBytes is the size of the prompt text (all messages, or the prompt).
	PromptBytes int
	// Probe names the probe prompt (probe workloads): its answers are recorded and
	// compared by consistent_outputs.
	Probe string
	// Counted is the statistics of the fault whose extra request this is (a burst's),
	// which its progress updates (Tally); nil: none.
	Counted *chaos.LiveStats
}

// Sender runs one request to its end and returns its result, for every request. The
// request is bounded by its own deadlines and by the runner's cancellation (Ctrl-C,
// drain timeout), not by ctx: a workload's ctx ending only stops new requests.
type Sender interface {
	Send(ctx context.Context, r *Req) *client.Result
}

// Workload is one source of load.
type Workload interface {
	Name() string
	Type() string
	// Run generates load from start+offset for the workload's window, or until ctx is
	// done, and returns once every request it started has ended.
	Run(ctx context.Context, start time.Time, s Sender) Stats
}

// Stats counts what a workload did.
type Stats struct {
	Requests int
	// Scheduled is how many requests an open loop's schedule held for this process (0:
	// not an open loop); fewer Requests means some were never sent (UnsentNote).
	Scheduled int
	// Stopped is what cut the run short before the schedule was due (Ctrl-C, a ledger
	// that could not be written; nil: nothing).
	Stopped error
}

// UnsentNote is the ledger note for an open-loop workload that did not send its whole
// schedule, "" when it did: hits still waiting for a worker (max_in_flight) or for a
// harness that fell behind when the window ended (plus StopGrace) are dropped, so the
// load offered was below the scenario's. The runner and the simulator both write it.
func (c *Common) UnsentNote(st Stats) string {
	if st.Scheduled == 0 || st.Requests >= st.Scheduled {
		return ""
	}
	why := "the harness fell behind its schedule (see the self-check's send lag)"
	switch m := c.Spec.MaxInFlight; {
	case st.Stopped != nil:
		why = fmt.Sprintf("the run was stopped before they were due (%v)", st.Stopped)
	case m > 0:
		why = fmt.Sprintf("max_in_flight %d held them until the window ended", m)
	}
	return fmt.Sprintf("workload %s sent %d of its %d scheduled requests: %s; the %d others were never sent",
		c.Spec.Name, st.Requests, st.Scheduled, why, st.Scheduled-st.Requests)
}

// Common is what every workload type shares.
type Common struct {
	Spec      scenarios.Workload
	Seed      int64
	Model     string
	Deadlines client.Deadlines
	// Shard is the part of the workload this process runs (zero: all of it).
	Shard Shard
}

// Name is the workload's name.
func (c *Common) Name() string { return c.Spec.Name }

// Type is the workload's type.
func (c *Common) Type() string { return c.Spec.Type }

// window returns the absolute start and end of the workload's window.
func (c *Common) window(start time.Time) (time.Time, time.Time) {
	s := start.Add(c.Spec.Start.D())
	return s, s.Add(c.Spec.Duration.D())
}

// rng returns a generator determined by the seed, the workload name and a stream key.
func (c *Common) rng(key uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(c.Spec.Name))
	return rand.New(rand.NewPCG(uint64(c.Seed)^h.Sum64(), key))
}

func (c *Common) base(id string, scheduled time.Time) client.Request {
	return client.Request{
		ID: id, Endpoint: c.Spec.Endpoint, Model: c.Model, MaxTokens: c.Spec.MaxTokens,
		Temperature: c.Spec.Temperature, Stream: c.Spec.Stream, Scheduled: scheduled,
		Deadlines: c.Deadlines,
		// A copy per request: a caller may add its own (traceparent) without a race.
		Header: c.Spec.Headers.HTTP(nil),
	}
}

// Single builds the one-shot request number seq of this workload (as open_loop and
// burst send them), scheduled at the given time. Load faults use it for extra bursts.
func (c *Common) Single(seq uint64, scheduled time.Time) *Req { return c.single(seq, scheduled) }

// single builds a one-shot request (open_loop, burst) for sequence number seq.
func (c *Common) single(seq uint64, scheduled time.Time) *Req {
	id := seqID(c.Spec.Name, seq)
	r := &Req{Request: c.base(id, scheduled), Workload: c.Spec.Name}
	text := Text(c.rng(seq), max(c.Spec.PromptTokens, 1))
	if c.Spec.Endpoint == scenarios.EndpointCompletions {
		r.Prompt = text
	} else {
		r.Messages = []client.Message{{Role: "user", Content: text}}
	}
	r.PromptBytes = len(text)
	return r
}

// Extra is the request factory of a fault's extra requests (queue_saturation,
// kv_pool_exhaustion): spec sent as a burst under its own name, with the scenario's seed,
// model and deadlines. The real runner and the simulator both build them here.
func Extra(sc *scenarios.Scenario, spec scenarios.Workload, name string) *Common {
	spec.Name = name
	spec.Type = scenarios.WorkloadBurst
	return &Common{Spec: spec, Seed: sc.Seed, Model: sc.Target.Model, Deadlines: Deadlines(sc.Deadlines)}
}

// Deadlines converts the scenario's deadlines.
func Deadlines(d scenarios.Deadlines) client.Deadlines {
	return client.Deadlines{Connect: d.Connect.D(), FirstToken: d.FirstToken.D(), Stall: d.Stall.D(), Total: d.Total.D()}
}

// Option configures a workload built by New.
type Option func(*options)

type options struct {
	retryBudget *rate.Limiter
	shard       Shard
}

// WithShard makes the workload run only shard s of itself (see Shard).
func WithShard(s Shard) Option { return func(o *options) { o.shard = s } }

// WithRetryBudget replaces an agents workload's retry budget (default RetryBudget(agents)).
// rate.NewLimiter(rate.Inf, 0) leaves retries unbounded.
func WithRetryBudget(l *rate.Limiter) Option { return func(o *options) { o.retryBudget = l } }

// New builds workload i of sc (defaults must have been applied).
func New(sc *scenarios.Scenario, i int, opts ...Option) (Workload, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if i < 0 || i >= len(sc.Workloads) {
		return nil, fmt.Errorf("workload: index %d out of range", i)
	}
	spec := sc.Workloads[i]
	if spec.Name == "" {
		spec.Name = fmt.Sprintf("%s-%d", spec.Type, i)
	}
	if spec.Duration == 0 {
		spec.Duration = sc.Duration - spec.Start
	}
	if spec.Endpoint == "" {
		spec.Endpoint = scenarios.EndpointChat
	}
	c := Common{Spec: spec, Seed: sc.Seed, Model: sc.Target.Model, Deadlines: Deadlines(sc.Deadlines), Shard: o.shard}
	switch spec.Type {
	case scenarios.WorkloadAgents:
		budget := o.retryBudget
		if budget == nil {
			budget = RetryBudget(max(o.shard.size(max(spec.Agents, 1)), 1))
		}
		return &Agents{Common: c, budget: budget}, nil
	case scenarios.WorkloadOpenLoop:
		p, err := NewPacer(spec.Pacer, c.rng(1<<63), spec.Duration.D())
		if err != nil {
			return nil, err
		}
		return &OpenLoop{Common: c, Pacer: p}, nil
	case scenarios.WorkloadBurst:
		return &Burst{Common: c}, nil
	case scenarios.WorkloadProbe:
		return &Probe{Common: c}, nil
	case scenarios.WorkloadTrace:
		return newTrace(sc, c)
	}
	return nil, fmt.Errorf("workload: unknown type %q", spec.Type)
}

var words = strings.Fields(`the a agent tool file write save read plan step code test build run
fix error check result value list map queue page token cache decode prefill router
server client request reply stream chunk model batch state event time limit bound`)

// Text returns about n bytes of deterministic word salad from r.
func Text(r *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	s := b.String()
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// SleepCtx waits d or until ctx is done; it reports whether the full wait elapsed.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
