package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/harness/client"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSender records requests and answers ok at once (or blocks when told to).
type fakeSender struct {
	mu    sync.Mutex
	reqs  []*Req
	block func(r *Req) <-chan struct{}
}

func (f *fakeSender) Send(ctx context.Context, r *Req) *client.Result {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if f.block != nil {
		if ch := f.block(r); ch != nil {
			<-ch
		}
	}
	return &client.Result{ID: r.ID, Outcome: ledger.OutcomeOK, Text: "reply to " + r.ID, Scheduled: r.Scheduled, Sent: time.Now()}
}

func (f *fakeSender) sorted() []*Req {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]*Req(nil), f.reqs...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// scenario's window is far longer than any test's work: what runs is fixed by counts
// (turns, Count) or by ctx, never by how far a loaded machine got in a short window.
func scenario(seed int64, ws ...scenarios.Workload) *scenarios.Scenario {
	sc := &scenarios.Scenario{Name: "t", Seed: seed, Duration: scenarios.Duration(2 * time.Minute),
		Target: scenarios.Target{URL: "http://127.0.0.1:1"}, Workloads: ws}
	sc.ApplyDefaults()
	return sc
}

func fingerprint(t *testing.T, reqs []*Req) string {
	t.Helper()
	var b strings.Builder
	for _, r := range reqs {
		body, _, err := client.Body(&r.Request)
		require.NoError(t, err)
		fmt.Fprintf(&b, "%s %d %d %s\n", r.ID, r.Session, r.Turn, body)
	}
	return b.String()
}

func runAll(t *testing.T, sc *scenarios.Scenario, s Sender) {
	t.Helper()
	for i := range sc.Workloads {
		w, err := New(sc, i)
		require.NoError(t, err)
		w.Run(context.Background(), time.Now(), s)
	}
}

func TestAgentsConversationGrows(t *testing.T) {
	sc := scenario(7, scenarios.Workload{Name: "ag", Type: "agents", Agents: 3, Turns: 3, Stream: true,
		ToolResultBytes: 40, PromptTokens: 20, ToolLatency: scenarios.Duration(time.Millisecond)})
	f := &fakeSender{}
	runAll(t, sc, f)
	reqs := f.sorted()
	require.Len(t, reqs, 9)
	for _, r := range reqs {
		require.Equal(t, fmt.Sprintf("ag-s%03d-t%03d", r.Session, r.Turn), r.ID)
		// system + task, then per earlier turn: assistant reply + tool result.
		require.Len(t, r.Messages, 2+2*(r.Turn-1), r.ID)
		if r.Turn > 1 {
			prevReply := r.Messages[len(r.Messages)-2]
			assert.Equal(t, "assistant", prevReply.Role, r.ID)
			assert.True(t, strings.HasPrefix(prevReply.Content, fmt.Sprintf("reply to ag-s%03d-t%03d", r.Session, r.Turn-1)),
				"%s: previous reply not appended: %+v", r.ID, prevReply)
			tool := r.Messages[len(r.Messages)-1].Content
			wantTool := toolNames[(r.Turn-2)%2]
			assert.True(t, strings.HasPrefix(tool, "tool "+wantTool+" result: "), "%s: tool result %q", r.ID, tool)
			assert.GreaterOrEqual(t, len(tool), 40, "%s: tool result size", r.ID)
		}
		assert.True(t, r.Stream, r.ID)
		assert.Equal(t, "ref", r.Model, r.ID)
		assert.Equal(t, 16, r.MaxTokens, r.ID)
	}
}

func TestSameSeedSameRequests(t *testing.T) {
	mk := func(seed int64) *scenarios.Scenario {
		return scenario(seed,
			scenarios.Workload{Name: "ag", Type: "agents", Agents: 4, Turns: 2},
			scenarios.Workload{Name: "ol", Type: "open_loop", Count: 15,
				Pacer: &scenarios.Pacer{Type: "poisson", Rate: 200}},
			scenarios.Workload{Name: "b", Type: "burst", Count: 5, Endpoint: "completions"})
	}
	var prints []string
	for _, seed := range []int64{3, 3, 4} {
		f := &fakeSender{}
		runAll(t, mk(seed), f)
		prints = append(prints, fingerprint(t, f.sorted()))
	}
	assert.Equal(t, prints[0], prints[1], "same seed produced different requests")
	assert.NotEqual(t, prints[0], prints[2], "different seeds produced identical requests")
	assert.Equal(t, 4*2+15+5, strings.Count(prints[0], "\n"), "requests")
}

// A stuck request blocks its own session and no other.
func TestAgentsStuckRequestBlocksSession(t *testing.T) {
	sc := scenario(1, scenarios.Workload{Name: "ag", Type: "agents", Agents: 3, Turns: 3})
	release := make(chan struct{})
	othersDone := make(chan struct{})
	var mu sync.Mutex
	done := 0
	f := &fakeSender{block: func(r *Req) <-chan struct{} {
		if r.Session == 2 && r.Turn == 1 {
			return release
		}
		mu.Lock()
		defer mu.Unlock()
		if done++; done == 6 {
			close(othersDone)
		}
		return nil
	}}
	w, _ := New(sc, 0)
	finished := make(chan struct{})
	go func() { w.Run(context.Background(), time.Now(), f); close(finished) }()
	select {
	case <-othersDone:
	case <-time.After(time.Minute):
		require.FailNow(t, "other sessions did not finish")
	}
	for _, r := range f.sorted() {
		if r.Session == 2 {
			require.Equal(t, 1, r.Turn, "session 2 sent another turn while turn 1 was stuck")
		}
	}
	close(release)
	select {
	case <-finished:
	case <-time.After(time.Minute):
		require.FailNow(t, "workload did not finish after release")
	}
	assert.Len(t, f.sorted(), 9)
}

func TestOpenLoopScheduledTimes(t *testing.T) {
	// 19 hits by count (the ones a 400ms window holds at 50/s), in a window a loaded
	// machine cannot overrun: how many go out never depends on how late vegeta is.
	sc := scenario(1, scenarios.Workload{Name: "ol", Type: "open_loop", Stream: true, Count: 19,
		Duration: scenarios.Duration(time.Minute), Pacer: &scenarios.Pacer{Type: "constant", Rate: 50}})
	f := &fakeSender{}
	start := time.Now()
	w, err := New(sc, 0)
	require.NoError(t, err)
	st := w.Run(context.Background(), start, f)
	reqs := f.sorted()
	require.Len(t, reqs, 19)
	assert.Equal(t, 19, st.Requests, "stats")
	var ids []string
	for _, r := range reqs {
		ids = append(ids, r.ID)
		// The schedule is the ideal one (hit i at i*20ms), however late vegeta sent.
		off := r.Scheduled.Sub(start)
		assert.GreaterOrEqual(t, off, time.Duration(0), r.ID)
		assert.LessOrEqual(t, off, 400*time.Millisecond, r.ID)
	}
	assert.Equal(t, "ol-000000", ids[0])
	assert.Equal(t, "ol-000018", ids[18])
}

func TestOpenLoopStopsOnCancel(t *testing.T) {
	// Two a second for a minute, cancelled by the third request: the bound below leaves
	// a loaded machine seconds to notice, and still shows the minute did not run.
	sc := scenario(1, scenarios.Workload{Name: "ol", Type: "open_loop",
		Duration: scenarios.Duration(time.Minute), Pacer: &scenarios.Pacer{Type: "constant", Rate: 2}})
	w, _ := New(sc, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	n := 0
	f := &fakeSender{block: func(*Req) <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 3 {
			cancel()
		}
		return nil
	}}
	done := make(chan Stats)
	go func() { done <- w.Run(ctx, time.Now(), f) }()
	select {
	case st := <-done:
		assert.GreaterOrEqual(t, st.Requests, 3)
		assert.LessOrEqual(t, st.Requests, 20)
	case <-time.After(time.Minute):
		require.FailNow(t, "open loop did not stop on cancel")
	}
}

func TestBurst(t *testing.T) {
	sc := scenario(1, scenarios.Workload{Name: "b", Type: "burst", Count: 12})
	f := &fakeSender{}
	runAll(t, sc, f)
	reqs := f.sorted()
	require.Len(t, reqs, 12)
	for _, r := range reqs {
		assert.True(t, r.Scheduled.Equal(reqs[0].Scheduled), "burst requests must share one scheduled instant")
	}
}

func TestSchedule(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	tests := []struct {
		name    string
		pacer   scenarios.Pacer
		du      time.Duration
		minHits int
		maxHits int
	}{
		{"constant 10/s for 1s", scenarios.Pacer{Type: "constant", Rate: 10}, time.Second, 9, 9},
		{"fractional 0.5/s for 4.5s", scenarios.Pacer{Type: "constant", Rate: 0.5}, 4500 * time.Millisecond, 2, 2},
		{"linear 10/s +10/s² for 2s", scenarios.Pacer{Type: "linear", Rate: 10, Slope: 10}, 2 * time.Second, 38, 42},
		{"sine 20±10 over 1s for 2s", scenarios.Pacer{Type: "sine", Rate: 20, Amplitude: 10, Period: scenarios.Duration(time.Second)}, 2 * time.Second, 38, 42},
		{"poisson 1000/s for 10s", scenarios.Pacer{Type: "poisson", Rate: 1000}, 10 * time.Second, 9700, 10300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPacer(&tt.pacer, rng(), tt.du)
			require.NoError(t, err)
			s := Schedule(p, tt.du, 0)
			require.GreaterOrEqual(t, len(s), tt.minHits, "hits")
			require.LessOrEqual(t, len(s), tt.maxHits, "hits")
			assert.IsNonDecreasing(t, s, "schedule not monotonic")
			assert.LessOrEqual(t, s[len(s)-1], tt.du, "last hit beyond the duration")
		})
	}
}

func TestPoissonDeterministicAndExponential(t *testing.T) {
	a := NewPoisson(100, rand.New(rand.NewPCG(9, 9)))
	b := NewPoisson(100, rand.New(rand.NewPCG(9, 9)))
	// Query b out of order: memoisation makes Pace a pure function of (elapsed, hits).
	require.Equal(t, a.Arrival(500), b.Arrival(500), "same seed, different arrivals")
	require.Equal(t, a.Arrival(3), b.Arrival(3), "same seed, different arrivals")
	// Gaps of a Poisson process: mean 1/λ and coefficient of variation 1.
	n := 20000
	var sum, sumSq float64
	for i := 1; i < n; i++ {
		g := (a.Arrival(uint64(i)) - a.Arrival(uint64(i-1))).Seconds()
		sum += g
		sumSq += g * g
	}
	mean := sum / float64(n-1)
	cv := (sumSq/float64(n-1) - mean*mean) / (mean * mean)
	assert.InDelta(t, 0.01, mean, 0.0005, "mean gap")
	assert.InDelta(t, 1, cv, 0.1, "squared coefficient of variation")
	w, stop := a.Pace(0, 0)
	assert.False(t, stop)
	assert.Equal(t, a.Arrival(0), w, "Pace(0,0)")
	assert.Equal(t, float64(100), a.Rate(time.Hour), "rate")
}

func TestNewPacerErrors(t *testing.T) {
	for _, p := range []*scenarios.Pacer{nil, {Type: "constant"}, {Type: "sine", Rate: 5}, {Type: "sine", Rate: 5, Amplitude: 9, Period: scenarios.Duration(time.Second)}, {Type: "weird", Rate: 1}} {
		_, err := NewPacer(p, rand.New(rand.NewPCG(1, 1)), time.Second)
		b, _ := json.Marshal(p)
		assert.ErrorContains(t, err, "workload: ", "pacer %s", b)
	}
}

// max_in_flight caps an open-loop workload's concurrency (vegeta's MaxWorkers); the
// hits it holds back are sent late, and their latency still counts from the schedule.
func TestOpenLoopMaxInFlight(t *testing.T) {
	sc := scenario(1, scenarios.Workload{Name: "ol", Type: "open_loop", MaxInFlight: 2, Count: 8,
		Duration: scenarios.Duration(time.Minute), Pacer: &scenarios.Pacer{Type: "constant", Rate: 100}})
	var mu sync.Mutex
	cur, peak := 0, 0
	f := &fakeSender{block: func(r *Req) <-chan struct{} {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		ch := make(chan struct{})
		go func() {
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			cur--
			mu.Unlock()
			close(ch)
		}()
		return ch
	}}
	w, _ := New(sc, 0)
	w.Run(context.Background(), time.Now(), f)
	reqs := f.sorted()
	require.Len(t, reqs, 8)
	assert.LessOrEqual(t, peak, 2, "peak concurrency (cap 2)")
	// Hit 7 was due at 80ms; with two at a time and 30ms each it went out much later,
	// but its scheduled time is still the ideal one.
	last := reqs[7]
	assert.LessOrEqual(t, last.Scheduled.Sub(reqs[0].Scheduled), 100*time.Millisecond,
		"hit 7 must keep its ideal offset (70ms)")
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		h    string
		want time.Duration
	}{
		{"", DefaultRetryAfter}, {"1", time.Second}, {"0.25", 250 * time.Millisecond},
		{"3600", MaxRetryAfter}, {"Wed, 21 Oct 2015 07:28:00 GMT", DefaultRetryAfter}, {"-1", DefaultRetryAfter},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RetryAfter(tt.h), "RetryAfter(%q)", tt.h)
	}
}

// rejectingSender refuses every request with Retry-After.
type rejectingSender struct {
	mu    sync.Mutex
	times []time.Time
}

func (s *rejectingSender) Send(ctx context.Context, r *Req) *client.Result {
	s.mu.Lock()
	s.times = append(s.times, time.Now())
	s.mu.Unlock()
	return &client.Result{ID: r.ID, Outcome: ledger.OutcomeRejected, Status: 503, RetryAfter: "0.2"}
}

// A rejected agent waits Retry-After before its next turn instead of spinning.
func TestAgentsBackOffOnRejection(t *testing.T) {
	sc := scenario(1, scenarios.Workload{Name: "ag", Type: "agents", Agents: 1, Turns: 3})
	s := &rejectingSender{}
	w, _ := New(sc, 0)
	w.Run(context.Background(), time.Now(), s)
	require.Len(t, s.times, 3)
	for i := 1; i < 3; i++ {
		assert.GreaterOrEqual(t, s.times[i].Sub(s.times[i-1]), 200*time.Millisecond,
			"turn %d sent sooner than the rejection's Retry-After asked", i+1)
	}
}

// An open loop whose max_in_flight still holds hits when its window (plus StopGrace)
// ends drops them: Stats says how many of the schedule went out, and UnsentNote says so
// for the ledger. A loaded machine can only send fewer, never more, than the few here.
func TestOpenLoopUnsentCounted(t *testing.T) {
	sc := scenario(1, scenarios.Workload{Name: "ol", Type: "open_loop", MaxInFlight: 1,
		Duration: scenarios.Duration(200 * time.Millisecond), Pacer: &scenarios.Pacer{Type: "constant", Rate: 100}})
	f := &fakeSender{block: func(r *Req) <-chan struct{} {
		ch := make(chan struct{})
		time.AfterFunc(500*time.Millisecond, func() { close(ch) })
		return ch
	}}
	w, _ := New(sc, 0)
	st := w.Run(context.Background(), time.Now(), f)
	ol := w.(*OpenLoop)
	assert.Equal(t, 19, st.Scheduled, "100/s over [0, 200ms)")
	assert.Equal(t, len(f.sorted()), st.Requests)
	require.Less(t, st.Requests, st.Scheduled)
	assert.Equal(t, fmt.Sprintf("workload ol sent %d of its 19 scheduled requests: max_in_flight 1 held them until the window ended; the %d others were never sent",
		st.Requests, 19-st.Requests), ol.UnsentNote(st))
	assert.Empty(t, ol.UnsentNote(Stats{Requests: 19, Scheduled: 19}))
	assert.Empty(t, ol.UnsentNote(Stats{Requests: 7}), "no schedule")
	ol.Spec.MaxInFlight = 0
	assert.Contains(t, ol.UnsentNote(st), "the harness fell behind its schedule")
	st.Stopped = errors.New("interrupted: signal")
	assert.Contains(t, ol.UnsentNote(st), "the run was stopped before they were due (interrupted: signal)", "not blamed on the harness's lag")
}
