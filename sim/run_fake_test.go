package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

// fakeServer is a small simulated target for the harness half's tests: each request
// gets a behaviour from plan (by request id), streams its tokens on the Loop, and the
// gauges count what is in flight. It stands in for the topology until NewTopology is
// wired in.
type fakeServer struct {
	loop *Loop
	plan func(id string) behaviour
	reqs map[string]*fakeReq
	// leaked counts requests whose cancel the server "lost" (leakOnCancel): the running
	// gauge stays up for them, like an abort that never reaches the scheduler.
	leaked int
	// faults and the times they were applied and reverted, for the tests.
	faults    []string
	refuse    map[string]bool // fault types CanModel refuses
	submitted []string
	// overloaded refuses every request while a "scheduler_stall" fault is on.
	stalled bool
}

// behaviour is what the fake does with one request.
type behaviour struct {
	refuse       error         // refused at Submit
	delay        time.Duration // before the first event
	tokens       int           // tokens to stream (default 4)
	gap          time.Duration // between tokens (default 10ms)
	hangAfter    int           // stop emitting after this many tokens (-1: never hang)
	failAfter    int           // end with failErr after this many tokens (-1: never)
	failErr      error
	leakOnCancel bool
}

func okBehaviour() behaviour {
	return behaviour{tokens: 4, gap: 10 * time.Millisecond, hangAfter: -1, failAfter: -1}
}

type fakeReq struct {
	id       string
	b        behaviour
	start    time.Time
	sent     int
	timer    *Timer
	emit     func(gen.Event)
	prompt   int
	stage    string
	done     bool
	deadline time.Time
}

func newFake(loop *Loop, plan func(id string) behaviour) *fakeServer {
	if plan == nil {
		plan = func(string) behaviour { return okBehaviour() }
	}
	return &fakeServer{loop: loop, plan: plan, reqs: map[string]*fakeReq{}, refuse: map[string]bool{}}
}

func (f *fakeServer) Submit(req *gen.Request, emit func(gen.Event)) (func(), error) {
	f.submitted = append(f.submitted, req.ID)
	if f.stalled {
		return nil, &gen.OverloadError{RetryAfter: 2 * time.Second, Reason: "stalled"}
	}
	b := f.plan(req.ID)
	if b.refuse != nil {
		return nil, b.refuse
	}
	if b.tokens == 0 {
		b.tokens = 4
	}
	if b.gap == 0 {
		b.gap = 10 * time.Millisecond
	}
	r := &fakeReq{id: req.ID, b: b, start: f.loop.Now(), emit: emit, prompt: len(req.Prompt), stage: "prealloc", deadline: req.Deadline}
	f.reqs[req.ID] = r
	r.timer = f.loop.After(b.delay, func() { f.step(r) })
	return func() {
		if r.done {
			return
		}
		r.done = true
		f.loop.Stop(r.timer)
		if b.leakOnCancel {
			f.leaked++
		}
		delete(f.reqs, r.id)
	}, nil
}

// step emits the next token (or the end) of r.
func (f *fakeServer) step(r *fakeReq) {
	if r.done {
		return
	}
	r.stage = "decode"
	if r.b.failAfter >= 0 && r.sent == r.b.failAfter {
		f.end(r, gen.Event{Done: true, Err: r.b.failErr})
		return
	}
	if r.b.hangAfter >= 0 && r.sent == r.b.hangAfter {
		r.stage = "hung"
		return // silent from now on
	}
	if r.sent == r.b.tokens {
		f.end(r, gen.Event{Done: true, Finish: "length", PromptTokens: r.prompt, CompletionTokens: r.sent})
		return
	}
	r.sent++
	// Tokens are bytes of the reference tokenizer: "a".."z".
	r.emit(gen.Event{Tokens: []int{'a' + (r.sent-1)%26}})
	r.timer = f.loop.After(r.b.gap, func() { f.step(r) })
}

func (f *fakeServer) end(r *fakeReq, ev gen.Event) {
	r.done = true
	delete(f.reqs, r.id)
	r.emit(ev)
}

func (f *fakeServer) Requests() map[string][]gen.RequestInfo {
	out := map[string][]gen.RequestInfo{"router": nil, "decode-0": nil}
	ids := make([]string, 0, len(f.reqs))
	for id := range f.reqs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := f.reqs[id]
		age := f.loop.Now().Sub(r.start).Seconds()
		out["router"] = append(out["router"], gen.RequestInfo{ID: id, Stage: "relay", AgeSeconds: age, Decode: "decode-0"})
		out["decode-0"] = append(out["decode-0"], gen.RequestInfo{ID: id, Stage: r.stage, AgeSeconds: age, PromptTokens: r.prompt, OutputTokens: r.sent})
	}
	return out
}

func (f *fakeServer) Gauges() map[string]map[string]float64 {
	n := float64(len(f.reqs))
	return map[string]map[string]float64{
		"router":    {"sglang:num_running_reqs": n},
		"prefill-0": {"sglang:num_running_reqs": 0, "sglang:num_queue_reqs": 0, "sglang:token_usage": 0.5},
		"decode-0": {"sglang:num_running_reqs": n + float64(f.leaked), "sglang:num_queue_reqs": 0, "unrelated_total": 7,
			"sglang:token_usage": min(1, 0.2*n)},
	}
}

func (f *fakeServer) CanModel(fl scenarios.Fault) error {
	if f.refuse[fl.Type] {
		return fmt.Errorf("fake: %s: %w", fl.Type, ErrNotModelled)
	}
	return nil
}

func (f *fakeServer) Fault(fl scenarios.Fault) (func(), error) {
	if err := f.CanModel(fl); err != nil {
		return nil, err
	}
	f.faults = append(f.faults, fmt.Sprintf("apply %s at %v", fl.Name, f.loop.Now().Sub(Epoch)))
	if fl.Type == "scheduler_stall" {
		f.stalled = true
	}
	return func() {
		f.faults = append(f.faults, fmt.Sprintf("revert %s at %v", fl.Name, f.loop.Now().Sub(Epoch)))
		f.stalled = false
	}, nil
}

// planBy maps request-id prefixes to behaviours (the longest matching prefix wins);
// others are ok.
func planBy(m map[string]behaviour) func(string) behaviour {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	return func(id string) behaviour {
		for _, k := range keys {
			if strings.HasPrefix(id, k) {
				return m[k]
			}
		}
		return okBehaviour()
	}
}
