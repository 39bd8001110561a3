package reports

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestParsePDPath(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		min      float64
		wantErr  bool
	}{
		{in: "pd_path", name: "pd_path", min: DefaultPDMinShare},
		{in: " pd_path(0.9) ", name: "pd_path(0.9)", min: 0.9},
		{in: "pd_path(1)", name: "pd_path(1)", min: 1},
		{in: "pd_path(0)", wantErr: true},
		{in: "pd_path(1.5)", wantErr: true},
		{in: "pd_path(x)", wantErr: true},
		{in: "pd_path(0.5", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAssertion(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "MIN_SHARE")
				return
			}
			require.NoError(t, err)
			assert.True(t, a.PDPath())
			assert.Equal(t, tc.name, a.Name)
			assert.Equal(t, tc.min, a.Value)
		})
	}
	a, err := ParseAssertion("truthful_health")
	require.NoError(t, err)
	assert.Equal(t, AssertTruthfulHealth, a.Name)
}

func FuzzParsePDPath(f *testing.F) {
	for _, s := range []string{"pd_path", "pd_path(0.99)", "pd_path()", "pd_path(NaN)", "pd_path(1e-9)", "pd_path(0.5))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssertion(s)
		if err != nil || !a.PDPath() {
			return
		}
		require.True(t, a.Value > 0 && a.Value <= 1, "min share %v", a.Value)
		again, err := ParseAssertion(a.Name)
		require.NoError(t, err)
		assert.Equal(t, a.Value, again.Value)
	})
}

// pdLedger is a run of 20 s with one ok request every 100 ms (first token 50 ms after
// it was sent) and a prefill counter scraped every second that rises with each request
// until stopAt, then stays flat (the prefill died and a decode-only fallback served the
// rest) or, with dead, can no longer be read.
func pdLedger(stopAt time.Duration, dead bool) []ledger.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []ledger.Event{{Time: t0, Type: ledger.EventRunStart, Scenario: "pd"}}
	const sel = "pdsoak:prefills_completed_total"
	for s := 0; s <= 20; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		n := min(at.Sub(t0), stopAt) / (100 * time.Millisecond)
		ev := ledger.Event{Time: at, Type: ledger.EventPDCounter, Source: "prefill-0", Metrics: map[string]float64{sel: float64(n)}}
		if dead && at.Sub(t0) > stopAt {
			ev = ledger.Event{Time: at, Type: ledger.EventPDCounter, Source: "prefill-0", Error: "connection refused", Detail: sel}
		}
		evs = append(evs, ev)
	}
	for i := 0; i < 200; i++ {
		sched := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		evs = append(evs, ledger.Event{Time: sched.Add(80 * time.Millisecond), Type: ledger.EventDone, RequestID: fmt.Sprint(i),
			Outcome: ledger.OutcomeOK, Scheduled: &sched, TTFT: 0.05, E2E: 0.08})
	}
	return evs
}

func TestPDPathVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stopAt    time.Duration
		dead      bool
		assertion string
		state     State
		stopped   float64
		share     float64
	}{
		{"every request through prefill", time.Hour, false, "pd_path", StatePass, -1, 1},
		{"fallback after 8s, counter flat", 8 * time.Second, false, "pd_path", StateFail, 8, 0.4},
		{"fallback after 8s, prefill unreachable", 8 * time.Second, true, "pd_path", StateFail, 8, 80.0 / 179},
		{"a lenient minimum", 8 * time.Second, true, "pd_path(0.3)", StatePass, 8, 80.0 / 179},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(pdLedger(tc.stopAt, tc.dead), Config{Assertions: []string{tc.assertion}})
			require.Len(t, r.Assertions, 1)
			a := r.Assertions[0]
			assert.Equal(t, tc.state, a.State, a.Detail)
			require.NotNil(t, r.PDPath)
			require.NotNil(t, r.PDPath.Share)
			assert.InDelta(t, tc.share, *r.PDPath.Share, 0.03)
			if tc.dead {
				// The ok requests sent by the failed reading (9 s) whose first token came
				// after the reading before the last good one (7 s) are not judged: the
				// last reading may not count them yet, and the prefills of the second
				// after it died with the process (first token after 7 s: scheduled
				// 7.0 s to 9.0 s, 21; 80 prefills over the 179 judged).
				assert.Equal(t, 21, r.PDPath.Unjudged)
			} else {
				assert.Zero(t, r.PDPath.Unjudged)
			}
			if tc.stopped < 0 {
				assert.Nil(t, r.PDPath.StoppedAt, "no window falls below the minimum")
				return
			}
			require.NotNil(t, r.PDPath.StoppedAt)
			assert.InDelta(t, tc.stopped, *r.PDPath.StoppedAt, PDWindow.Seconds(), "the window where prefills stopped")
			if tc.state == StateFail {
				assert.Contains(t, a.Detail, "disaggregation stopped in the window from")
			}
			for _, w := range r.PDPath.Windows {
				if w.Start >= tc.stopped+PDWindow.Seconds() && w.Share != nil {
					assert.Zero(t, *w.Share, "window %v after the stop", w.Start)
				}
			}
		})
	}
}

func TestPDPathNotEvaluated(t *testing.T) {
	evs := pdLedger(time.Hour, false)
	r := Compute(evs[:1], Config{Assertions: []string{"pd_path"}})
	assert.Equal(t, StateNotEvaluated, r.Assertions[0].State)
	// One reading only: no rise can be measured.
	one := append([]ledger.Event{evs[0], evs[1]}, evs[30:]...)
	r = Compute(one, Config{Assertions: []string{"pd_path"}})
	assert.Equal(t, StateNotEvaluated, r.Assertions[0].State)
	assert.Contains(t, r.Assertions[0].Detail, "read 1 times")
}

// healthLedger: health probed every 500 ms (200 unless truthful and failing), 5 requests
// a second, all answered 503 from 6 s to 12 s.
func healthLedger(truthful bool) []ledger.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []ledger.Event{{Time: t0, Type: ledger.EventRunStart, Scenario: "h"}}
	failing := func(d time.Duration) bool { return d >= 6*time.Second && d < 12*time.Second }
	for d := time.Duration(0); d < 20*time.Second; d += 500 * time.Millisecond {
		st := 200
		if truthful && failing(d) {
			st = 503
		}
		evs = append(evs, ledger.Event{Time: t0.Add(d), Type: ledger.EventHealth, Source: "router", URL: "http://x/health", Status: st})
	}
	for d := time.Duration(0); d < 20*time.Second; d += 200 * time.Millisecond {
		sched := t0.Add(d)
		ev := ledger.Event{Time: sched.Add(10 * time.Millisecond), Type: ledger.EventDone, RequestID: d.String(), Scheduled: &sched,
			Outcome: ledger.OutcomeOK, Status: 200, TTFT: 0.005, E2E: 0.01}
		if failing(d) {
			ev.Outcome, ev.Status, ev.TTFT = ledger.OutcomeRejected, 503, 0
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestTruthfulHealth(t *testing.T) {
	r := Compute(healthLedger(false), Config{Assertions: []string{"truthful_health"}})
	a := r.Assertions[0]
	require.Equal(t, StateFail, a.State, a.Detail)
	require.Len(t, r.HealthLies, 1)
	l := r.HealthLies[0]
	assert.Equal(t, "router", l.Source)
	assert.Equal(t, 6.0, l.Start)
	assert.Equal(t, 12.0, l.End)
	assert.Equal(t, 30, l.Requests)
	assert.Contains(t, a.Detail, "30 HTTP 503")

	r = Compute(healthLedger(true), Config{Assertions: []string{"truthful_health"}})
	assert.Equal(t, StatePass, r.Assertions[0].State, r.Assertions[0].Detail)
	assert.Empty(t, r.HealthLies)

	r = Compute(healthLedger(true)[:1], Config{Assertions: []string{"truthful_health"}})
	assert.Equal(t, StateNotEvaluated, r.Assertions[0].State)
}

// A labelled counter (SGLang's sglang:num_requests_total, any prometheus_client
// Counter with labelnames) has no series until its first increment: the reading at
// load start finds none. Those readings are 0, not failed ones: otherwise the first
// good reading became the baseline and the prefills before it were never counted
// (every request went through prefill, yet 95% and FAIL). A counter never seen at all
// stays not evaluated (a typo in the selector is not a share of 0).
func TestPDPathCounterAbsentAtStart(t *testing.T) {
	evs := pdLedger(time.Hour, false)
	const sel = "pdsoak:prefills_completed_total"
	evs[1] = ledger.Event{Time: evs[1].Time, Type: ledger.EventPDCounter, Source: "prefill-0",
		Error: "harness: no such series: prefill-0 does not export " + sel, Detail: sel, Cause: ledger.PDCounterAbsent}
	r := Compute(evs, Config{Assertions: []string{"pd_path"}})
	a := r.Assertions[0]
	assert.Equal(t, StatePass, a.State, a.Detail)
	require.NotNil(t, r.PDPath.Share)
	assert.Equal(t, 1.0, *r.PDPath.Share)
	assert.Equal(t, 200.0, r.PDPath.Prefills)

	// Absent in every reading: not evaluated, naming why.
	var never []ledger.Event
	for _, e := range evs {
		if e.Type == ledger.EventPDCounter {
			e = ledger.Event{Time: e.Time, Type: e.Type, Source: e.Source, Error: evs[1].Error, Detail: sel, Cause: ledger.PDCounterAbsent}
		}
		never = append(never, e)
	}
	r = Compute(never, Config{Assertions: []string{"pd_path"}})
	assert.Equal(t, StateNotEvaluated, r.Assertions[0].State, r.Assertions[0].Detail)
	assert.Contains(t, r.Assertions[0].Detail, "does not export")
}

// Overload refused explicitly (I2: 503 at admission) while the admitted requests keep
// streaming is not a health lie: the server is working, only full, and a 200 from
// /health is the truth. Refusals count against /health only in a window in which no
// request got a token (the dead-backend 503s of healthLedger).
func TestTruthfulHealthOverloadRefusals(t *testing.T) {
	evs := healthLedger(false)
	t0 := evs[0].Time
	// Four long streams admitted at 5 s, tokens every 100 ms until 14 s.
	for k := 0; k < 4; k++ {
		sched := t0.Add(5*time.Second + time.Duration(k)*time.Millisecond)
		itl := make([]float64, 89)
		for i := range itl {
			itl[i] = 0.1
		}
		evs = append(evs, ledger.Event{Time: sched.Add(9 * time.Second), Type: ledger.EventDone, RequestID: fmt.Sprint("long", k),
			Scheduled: &sched, Outcome: ledger.OutcomeOK, Status: 200, TTFT: 0.1, E2E: 9, ITL: itl})
	}
	r := Compute(evs, Config{Assertions: []string{"truthful_health"}})
	a := r.Assertions[0]
	assert.Equal(t, StatePass, a.State, a.Detail)
	assert.Empty(t, r.HealthLies)

	// The same streams stalled at 7 s (their last token; classified stalled at 14 s):
	// from 8 s nothing progresses, and the 200s while every request is refused lie.
	for i := range evs {
		if e := &evs[i]; e.Type == ledger.EventDone && len(e.ITL) > 0 {
			e.Outcome, e.ITL = ledger.OutcomeStalled, e.ITL[:19]
		}
	}
	r = Compute(evs, Config{Assertions: []string{"truthful_health"}})
	a = r.Assertions[0]
	require.Equal(t, StateFail, a.State, a.Detail)
	require.Len(t, r.HealthLies, 1)
	assert.Equal(t, 8.0, r.HealthLies[0].Start)
	assert.Equal(t, 12.0, r.HealthLies[0].End)
}
