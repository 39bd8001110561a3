package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/client"
	"pdsoak/harness/judge"
	"pdsoak/harness/target"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

func TestLiveStateObserve(t *testing.T) {
	var s judge.Liveness
	var got []string
	for _, ok := range []bool{true, false, true, false, false, false, true, true} {
		if typ, changed := s.Observe(ok); changed {
			got = append(got, string(typ))
		} else {
			got = append(got, "-")
		}
	}
	// One failed probe is not an outage; two in a row are; the first answer ends it.
	assert.Equal(t, []string{"-", "-", "-", "-", "target_down", "-", "target_up", "-"}, got)
}

// verdictOf computes the report of a run as the CLI does.
func verdictOf(t *testing.T, sc *scenarios.Scenario, dir string) *reports.Results {
	t.Helper()
	return reports.Compute(readLedger(t, dir), judge.ReportConfig(sc))
}

// A target that dies mid-run with no fault declared never passes: its requests fail
// unexplained, the liveness probe says when it went down, and the agents back off
// instead of burning their turns, so load lasts the whole window.
func TestTargetDiesWithoutFaultFails(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	window := 5 * time.Second
	sc := testScenario(b.srv.URL, window, scenarios.Workload{Name: "agents", Type: "agents", Agents: 3,
		ThinkTime: scenarios.Duration(20 * time.Millisecond)})
	generousDeadlines(sc)
	sc.Drain.Timeout = scenarios.Duration(10 * time.Second)
	sc.Assertions = []string{reports.AssertNoSilentDrops, reports.AssertValidResponses, reports.AssertExplainedErrors}
	// The server dies once requests are flowing (an event, not a timer).
	died := make(chan struct{})
	kill := make(chan struct{}, 1)
	go func() {
		<-kill
		b.close()
		close(died)
	}()
	onEvent := func(ev ledger.Event) {
		if ev.Type == ledger.EventDone && ev.Outcome == ledger.OutcomeOK {
			select {
			case kill <- struct{}{}:
			default:
			}
		}
	}
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, OnEvent: onEvent, LivenessInterval: 100 * time.Millisecond}))
	<-died
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	require.NotZero(t, outcomes[ledger.OutcomeTransportError], "outcomes %v", outcomes)
	down := eventsOf(evs, ledger.EventTargetDown)
	require.NotEmpty(t, down, "no target_down in the ledger")
	assert.Empty(t, eventsOf(evs, ledger.EventTargetUp))
	// Every failure carries its cause, and nothing explains these.
	for _, ev := range eventsOf(evs, ledger.EventDone) {
		if ev.Outcome != ledger.OutcomeOK {
			assert.Equal(t, ledger.CauseUnexplained, ev.Cause, "%s %s", ev.RequestID, ev.Outcome)
		}
	}
	// Backing off (250 ms, doubling to 4 s) bounds the refused re-sends of 3 agents over
	// a 5 s window; without it they number in the hundreds.
	assert.Less(t, outcomes[ledger.OutcomeTransportError], 3*8, "outcomes %v", outcomes)
	// Load went on to the end of the window: the last refused attempt came late in it.
	start := only(t, evs, ledger.EventRunStart).Time
	var last time.Time
	for _, ev := range eventsOf(evs, ledger.EventScheduled) {
		if ev.Time.After(last) {
			last = ev.Time
		}
	}
	killedAt := down[0].Time
	assert.True(t, last.After(killedAt.Add(time.Second)), "agents stopped sending %v after the target died", last.Sub(killedAt))

	r := verdictOf(t, sc, dir)
	assert.Equal(t, reports.VerdictFail, r.Verdict)
	want := fmt.Sprintf("target went down at %.1f s and did not come back", down[0].Time.Sub(start).Seconds())
	var expl reports.AssertionResult
	for _, a := range r.Assertions {
		if a.Name == reports.AssertExplainedErrors {
			expl = a
		}
	}
	assert.Equal(t, reports.StateFail, expl.State)
	assert.Contains(t, expl.Detail, want)
	assert.Contains(t, strings.Join(r.Notes, "\n"), want)
	assert.Equal(t, r.Outcomes[ledger.OutcomeTransportError]+r.Outcomes[ledger.OutcomeConnectionLost]+r.Outcomes[ledger.OutcomeTruncated], r.Causes[ledger.CauseUnexplained])
}

// Ctrl-C after a silent drop: the drop stands, requests in flight past their
// first-token deadline are drops too (with a forensics bundle taken while they are
// held), the rest are unresolved_at_interrupt with their age, and the verdict is FAIL,
// not INVALID: the evidence is definitive.
func TestInterruptAfterDropsFails(t *testing.T) {
	b := newBadServer(t, []string{"hang"})
	sc := testScenario(b.srv.URL, time.Minute,
		scenarios.Workload{Name: "early", Type: "burst", Count: 2},
		scenarios.Workload{Name: "held", Type: "agents", Agents: 2, Turns: 1, Start: scenarios.Duration(2 * time.Second)})
	generousDeadlines(sc)
	// The burst's requests hang past a short first-token bound (drops by the client);
	// the agents' are sent once those drops are in and interrupted while held, within
	// the bound.
	sc.Deadlines.FirstToken = scenarios.Duration(500 * time.Millisecond)
	sc.Assertions = []string{reports.AssertNoSilentDrops, reports.AssertNoLeaks}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var held atomic.Int32
	onEvent := func(ev ledger.Event) {
		if ev.Type == ledger.EventSent && ev.Workload == "held" && held.Add(1) == 2 {
			cancel(errors.New("signal: interrupt"))
		}
	}
	dir := t.TempDir()
	require.NoError(t, Run(ctx, sc, Options{OutDir: dir, OnEvent: onEvent, CancelDrain: 100 * time.Millisecond, ResolveAfterCancel: time.Minute}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeDeadlineExceeded: 2, ledger.OutcomeUnresolved: 2}, outcomes)
	for _, ev := range eventsOf(evs, ledger.EventDone) {
		if ev.Outcome == ledger.OutcomeUnresolved {
			assert.Equal(t, "held", ev.Workload)
			assert.Positive(t, ev.Age, "%s: no age", ev.RequestID)
		}
	}
	r := verdictOf(t, sc, dir)
	assert.Equal(t, reports.VerdictFail, r.Verdict, "invalid reasons %v, notes %v", r.InvalidReasons, r.Notes)
	assert.Positive(t, r.SilentDrops)
	assert.Empty(t, r.InvalidReasons)
}

// What the interrupt's bundle looks for: requests in flight past their first-token
// (or total) deadline.
func TestLiveReqsPastFirstToken(t *testing.T) {
	now := time.Now()
	var l liveReqs
	d := client.Deadlines{FirstToken: 10 * time.Second, Total: 30 * time.Second}
	live := map[string]*liveReq{}
	add := func(id string, stream bool, sentAgo, firstAgo time.Duration) {
		lr := l.start(&client.Request{ID: id, Stream: stream, Deadlines: d})
		live[id] = lr
		if sentAgo > 0 {
			lr.sent.Store(now.Add(-sentAgo).UnixNano())
		}
		if firstAgo > 0 {
			lr.first.Store(now.Add(-firstAgo).UnixNano())
		}
	}
	add("fresh", true, 2*time.Second, 0)
	add("unsent", true, 0, 0)
	add("held", true, 12*time.Second, 0)
	add("streaming", true, 20*time.Second, 15*time.Second)
	add("whole-body", false, 12*time.Second, 0)
	add("too-old", true, 31*time.Second, 25*time.Second)
	n, oldest := l.pastFirstToken(now)
	assert.Equal(t, 2, n)
	assert.Equal(t, 31*time.Second, oldest)
	l.end(live["too-old"])
	n, _ = l.pastFirstToken(now)
	assert.Equal(t, 1, n)
}

// noTarget is a target with no endpoints: the bundle collects the harness's own state.
type noTarget struct{}

func (noTarget) URL() string                     { return "http://127.0.0.1:1" }
func (noTarget) MetricsSources() []target.Source { return nil }
func (noTarget) DebugSources() []target.Source   { return nil }
func (noTarget) Stop(context.Context) error      { return nil }

// On an interrupt with a request in flight past its first-token deadline, a forensics
// bundle is written while it is still held; a second Ctrl-C (Hurry) skips it.
func TestInterruptBundle(t *testing.T) {
	for _, hurried := range []bool{false, true} {
		t.Run(fmt.Sprintf("hurried=%v", hurried), func(t *testing.T) {
			dir := t.TempDir()
			led, err := ledger.Create(filepath.Join(dir, ledger.EventsFile), nil)
			require.NoError(t, err)
			opts := Options{OutDir: dir}.withDefaults()
			if hurried {
				h, cancel := context.WithCancel(context.Background())
				cancel()
				opts.Hurry = h
			}
			r := &runner{sc: &scenarios.Scenario{}, opts: opts, log: slog.New(slog.DiscardHandler), led: led,
				hc: &http.Client{}, tgt: noTarget{}, exec: &executor{}}
			lr := r.exec.live.start(&client.Request{ID: "held", Stream: true, Deadlines: client.Deadlines{FirstToken: time.Second, Total: time.Minute}})
			lr.sent.Store(time.Now().Add(-5 * time.Second).UnixNano())
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			r.interrupted(ctx, r.newBundles())
			require.NoError(t, led.Close())
			assert.True(t, r.exec.interrupted.Load())
			matches, _ := filepath.Glob(filepath.Join(dir, "forensics", "interrupt-*", "MANIFEST.json"))
			notes := eventsOf(readLedger(t, dir), ledger.EventNote)
			if hurried {
				assert.Empty(t, matches)
				assert.Empty(t, notes)
				return
			}
			assert.Len(t, matches, 1)
			require.Len(t, notes, 1)
			assert.Equal(t, "forensics", notes[0].Source)
			assert.Contains(t, notes[0].Message, "1 requests in flight past their first-token deadline")
		})
	}
}

// A shard other than the first applies no faults, so it cannot tell what explains an
// error: it leaves the cause to reports, which judges the merged ledger with shard 1's
// faults in it. Shard 1 (and an unsharded run) records it.
func TestShardsLeaveCausesToTheMerge(t *testing.T) {
	b := newBadServer(t, []string{"http_500"})
	for _, sh := range []Shard{{Index: 1, Count: 2}, {Index: 2, Count: 2}} {
		sc := testScenario(b.srv.URL, 200*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 4})
		generousDeadlines(sc)
		dir := t.TempDir()
		require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, Shard: sh}))
		dones := eventsOf(readLedger(t, dir), ledger.EventDone)
		require.NotEmpty(t, dones)
		for _, ev := range dones {
			require.Equal(t, ledger.OutcomeHTTPError, ev.Outcome)
			if sh.Index == 1 {
				assert.Equal(t, ledger.CauseUnexplained, ev.Cause, "shard %d", sh.Index)
			} else {
				assert.Empty(t, ev.Cause, "shard %d", sh.Index)
			}
		}
	}
}
