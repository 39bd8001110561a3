package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// wedgeScenario is the scenario the fake wedges: the search may vary agents, turns and
// decode's pool size; its own fault is irrelevant to the fake.
const wedgeScenario = `name: wedge
seed: 1
duration: 20s
reference:
  prefill: 1
  decode: 1
  semantics: sglang
  decode_args: [--context-length=4096]
workloads:
  - {name: agents, type: agents, agents: 30, turns: 4, max_tokens: 8}
assertions: [no_silent_drops, valid_responses]
faults:
  - {name: kill, type: decode_crash, target: decode-0, at: 5s, for: 2s}
explore:
  agents: [5, 40]
  turns: [2, 8]
  flags:
    decode:
      --max-total-tokens: [512, 65536]
`

// testFaultTypes is a small catalogue: a process fault, a client fault and one that
// needs a param (so cannot be drawn with defaults).
func testFaultTypes() map[string]scenarios.FaultType {
	return map[string]scenarios.FaultType{
		"decode_crash":      {Targets: scenarios.TargetProcess},
		"client_disconnect": {Targets: scenarios.TargetWorkload},
		"failpoint": {Targets: scenarios.TargetProcess, Check: func(f scenarios.Fault) error {
			if f.Params["name"] == nil {
				return fmt.Errorf("params.name must be set")
			}
			return nil
		}},
	}
}

// epoch is the fake's clock: ledgers are byte-identical for identical scenarios.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// wedge decides the fake's behaviour from the scenario, like the sglang prealloc wedge:
// silent drops held in decode's prealloc queue when the pool is small (< 1000 tokens)
// and more than 8 agents share it; truncated answers from turn 7 on.
func wedge(sc *scenarios.Scenario) (drops, truncated bool) {
	mtt := 1 << 20
	if v, ok := flagValue(sc.Reference.DecodeArgs, "--max-total-tokens"); ok {
		mtt, _ = strconv.Atoi(v)
	}
	agents, turns := 0, 0
	for _, w := range sc.Workloads {
		if w.Type == scenarios.WorkloadAgents {
			agents, turns = max(agents, w.Agents), max(turns, w.Turns)
		}
	}
	return mtt < 1000 && agents > 8, turns >= 7
}

// fakeSim is a RunFunc that writes a real ledger with package ledger's Writer: one
// request per agent and turn, whose outcomes follow wedge.
type fakeSim struct {
	calls atomic.Int64
	// tick, when set, runs once per call (the time-budget test advances its clock).
	tick func()
	// err, when set, is every call's error.
	err error
}

func (f *fakeSim) run(_ context.Context, sc *scenarios.Scenario, outDir string) error {
	f.calls.Add(1)
	if f.tick != nil {
		f.tick()
	}
	if f.err != nil {
		return f.err
	}
	w, err := ledger.Create(filepath.Join(outDir, ledger.EventsFile), nil)
	if err != nil {
		return err
	}
	drops, truncated := wedge(sc)
	at := func(d time.Duration) time.Time { return epoch.Add(d) }
	w.Emit(ledger.Event{Time: at(0), Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed})
	debug := json.RawMessage(`{"sources":[{"process":"decode-0","entries":[{"stage":"prealloc"}]}]}`)
	n := 0
	for _, wl := range sc.Workloads {
		if wl.Type != scenarios.WorkloadAgents {
			continue
		}
		for a := 1; a <= wl.Agents; a++ {
			for t := 1; t <= wl.Turns; t++ {
				n++
				id := fmt.Sprintf("%s-%d-%d", wl.Name, a, t)
				sched := at(time.Duration(n) * time.Millisecond)
				w.Emit(ledger.Event{Time: sched, Type: ledger.EventScheduled, RequestID: id, Workload: wl.Name, Session: a, Turn: t})
				done := ledger.Event{Time: sched.Add(50 * time.Millisecond), Type: ledger.EventDone, RequestID: id,
					Workload: wl.Name, Session: a, Turn: t, Scheduled: &sched, Outcome: ledger.OutcomeOK, E2E: 0.05, TTFT: 0.01,
					FinishReason: "length", CompletionTokens: wl.MaxTokens}
				switch {
				case drops && t >= 2:
					done.Outcome, done.Phase, done.Age, done.ServerDebug = ledger.OutcomeDeadlineExceeded, ledger.PhaseBeforeFirstToken, 30, debug
					done.TTFT, done.FinishReason, done.CompletionTokens = 0, "", 0
				case truncated && t >= 7:
					done.Outcome, done.FinishReason = ledger.OutcomeTruncated, ""
				}
				w.Emit(done)
			}
		}
	}
	w.Emit(ledger.Event{Time: at(time.Minute), Type: ledger.EventRunEnd})
	return w.Close()
}

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
