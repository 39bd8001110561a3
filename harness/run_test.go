package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"pdsoak/chaos"
	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// badServer is a hand-written OpenAI-ish server that misbehaves by request id: the
// id's hash picks one defect, so each run with the same seed meets the same mix.
// It lists held requests on /debug/requests and exposes gauges on /metrics.
type badServer struct {
	srv     *httptest.Server
	stop    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	held    map[string]time.Time
	running int
	// defects the server draws from; nil: every defect.
	defects []string
	// leak makes the running gauge stay above 0.
	leak bool
	// slots, when set, is the server's capacity: a request waits for a slot before its
	// response headers go out (a queue in front of the model, as a server at capacity).
	slots chan struct{}
}

var allDefects = []string{"ok", "ok", "ok", "ok", "reject", "hang", "headers_then_nothing", "stall", "comments",
	"no_done", "invalid", "error_event", "http_500", "reset"}

func newBadServer(t *testing.T, defects []string) *badServer {
	b := &badServer{stop: make(chan struct{}), held: map[string]time.Time{}, defects: defects}
	b.srv = httptest.NewServer(b)
	t.Cleanup(b.close)
	return b
}

func (b *badServer) close() {
	b.once.Do(func() { close(b.stop) })
	b.srv.CloseClientConnections()
	b.srv.Close()
}

func (b *badServer) defect(id string) string {
	d := b.defects
	if d == nil {
		d = allDefects
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return d[h.Sum32()%uint32(len(d))]
}

func (b *badServer) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-b.stop:
	}
}

func (b *badServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/debug/requests":
		b.mu.Lock()
		var list []map[string]any
		for id, since := range b.held {
			list = append(list, map[string]any{"id": id, "stage": "hanging", "age_seconds": time.Since(since).Seconds()})
		}
		b.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"requests": list})
		return
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"bad-model","object":"model"}]}`)
		return
	case "/version":
		fmt.Fprint(w, `{"version":"bad-1.2.3"}`)
		return
	case "/metrics":
		b.mu.Lock()
		n := b.running
		b.mu.Unlock()
		if b.leak {
			n++
		}
		fmt.Fprintf(w, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs %d\nsglang:num_queue_reqs 0\n", n)
		return
	}
	// Read the body like a real server: net/http only notices a client that went away
	// (and cancels r.Context()) once the request body has been consumed.
	io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-Request-ID")
	b.mu.Lock()
	b.running++
	b.held[id] = time.Now()
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running--
		delete(b.held, id)
		b.mu.Unlock()
	}()
	if b.slots != nil {
		select {
		case b.slots <- struct{}{}:
			defer func() { <-b.slots }()
		case <-r.Context().Done():
			return
		case <-b.stop:
			return
		}
	}
	sse := func() http.Flusher {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		f := w.(http.Flusher)
		f.Flush()
		return f
	}
	tok := func(f http.Flusher, s string) {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", s)
		f.Flush()
	}
	switch b.defect(id) {
	case "ok":
		f := sse()
		tok(f, "hello ")
		tok(f, "world")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	case "slow_ok": // six tokens, 40 ms apart
		f := sse()
		for i := range 6 {
			if i > 0 {
				time.Sleep(40 * time.Millisecond)
			}
			tok(f, "t ")
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	case "reject":
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
	case "hang":
		b.hang(r)
	case "headers_then_nothing":
		sse()
		b.hang(r)
	case "stall":
		f := sse()
		tok(f, "a")
		b.hang(r)
	case "comments":
		f := sse()
		for i := 0; i < 200; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-b.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			fmt.Fprint(w, ": ping\n\n")
			f.Flush()
		}
	case "no_done":
		f := sse()
		tok(f, "a")
	case "invalid":
		f := sse()
		fmt.Fprint(w, "data: {oops\n\n")
		f.Flush()
	case "error_event":
		f := sse()
		fmt.Fprint(w, "data: {\"error\":{\"message\":\"kv transfer failed\"}}\n\n")
		f.Flush()
	case "http_500":
		http.Error(w, "boom", 500)
	case "reset":
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}
}

func testScenario(url string, dur time.Duration, ws ...scenarios.Workload) *scenarios.Scenario {
	sc := &scenarios.Scenario{Name: "t", Seed: 5, Duration: scenarios.Duration(dur),
		Target:    scenarios.Target{URL: url, MetricsURL: url + "/metrics"},
		Workloads: ws,
		Deadlines: scenarios.Deadlines{Connect: scenarios.Duration(2 * time.Second), FirstToken: scenarios.Duration(1200 * time.Millisecond),
			Stall: scenarios.Duration(500 * time.Millisecond), Total: scenarios.Duration(3 * time.Second)},
		Drain: scenarios.Drain{Timeout: scenarios.Duration(6 * time.Second), LeakTimeout: scenarios.Duration(2 * time.Second)},
		// A loaded machine keeps the harness late by seconds; a test whose point is a
		// late harness sets its own bound.
		SelfCheck: scenarios.SelfCheck{MaxLag: scenarios.Duration(30 * time.Second)},
	}
	for i := range sc.Workloads {
		sc.Workloads[i].Stream = true
	}
	return sc
}

// generousDeadlines gives requests expected to succeed deadlines a loaded machine
// keeps; a test whose point is a timeout keeps testScenario's tight ones.
func generousDeadlines(sc *scenarios.Scenario) {
	sc.Deadlines = scenarios.Deadlines{Connect: scenarios.Duration(30 * time.Second),
		FirstToken: scenarios.Duration(30 * time.Second), Stall: scenarios.Duration(30 * time.Second),
		Total: scenarios.Duration(time.Minute)}
	sc.Drain.Timeout = scenarios.Duration(time.Minute)
}

func readLedger(t *testing.T, dir string) []ledger.Event {
	t.Helper()
	evs, _, err := ledger.ReadFile(filepath.Join(dir, "events.jsonl"))
	require.NoError(t, err)
	return evs
}

// checkOneTerminal asserts the ledger property: every scheduled request has exactly
// one done event with one valid outcome, and no done event lacks its scheduled event.
func checkOneTerminal(t *testing.T, evs []ledger.Event) map[ledger.Outcome]int {
	t.Helper()
	sched := map[string]int{}
	done := map[string]int{}
	outcomes := map[ledger.Outcome]int{}
	for _, ev := range evs {
		switch ev.Type {
		case ledger.EventScheduled:
			sched[ev.RequestID]++
		case ledger.EventDone:
			done[ev.RequestID]++
			assert.True(t, ev.Outcome.Valid(), "%s: invalid outcome %q", ev.RequestID, ev.Outcome)
			outcomes[ev.Outcome]++
			if ev.Outcome.SilentDrop() {
				assert.NotEmpty(t, ev.Phase, "%s: silent drop without phase", ev.RequestID)
			}
		}
	}
	require.NotEmpty(t, sched, "no requests scheduled")
	for id, n := range sched {
		assert.True(t, n == 1 && done[id] == 1, "%s: scheduled %d times, done %d times", id, n, done[id])
	}
	for id := range done {
		assert.NotZero(t, sched[id], "%s: done without scheduled", id)
	}
	return outcomes
}

// only returns the one event of type typ, failing the test unless there is exactly one.
func only(t *testing.T, evs []ledger.Event, typ ledger.EventType) ledger.Event {
	t.Helper()
	got := eventsOf(evs, typ)
	require.Len(t, got, 1, "%s events", typ)
	return got[0]
}

func eventsOf(evs []ledger.Event, typ ledger.EventType) []ledger.Event {
	var out []ledger.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func TestEveryRequestHasExactlyOneOutcome(t *testing.T) {
	b := newBadServer(t, nil)
	// The requests (and so their defects) are fixed by counts, not by how many a loaded
	// machine sends before a short window closes: the run ends when the workloads are
	// done, long before the window. The deadlines stay tight: timeouts are the point.
	sc := testScenario(b.srv.URL, 2*time.Minute,
		scenarios.Workload{Name: "agents", Type: "agents", Agents: 6, Turns: 3},
		scenarios.Workload{Name: "ol", Type: "open_loop", Count: 30, Pacer: &scenarios.Pacer{Type: "poisson", Rate: 20}},
		scenarios.Workload{Name: "burst", Type: "burst", Count: 15, Start: scenarios.Duration(200 * time.Millisecond)},
	)
	sc.Drain.Timeout = scenarios.Duration(time.Minute)
	dir := t.TempDir()
	var seen sync.Map
	err := Run(context.Background(), sc, Options{OutDir: dir, OnEvent: func(ev ledger.Event) { seen.Store(ev.Type, true) }})
	require.NoError(t, err)
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	t.Logf("outcomes: %v", outcomes)
	for _, o := range []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeRejected, ledger.OutcomeStalled,
		ledger.OutcomeDeadlineExceeded, ledger.OutcomeTruncated, ledger.OutcomeInvalid, ledger.OutcomeStreamError,
		ledger.OutcomeHTTPError} {
		assert.NotZero(t, outcomes[o], "no %s outcome in a mix that includes it", o)
	}
	// Silent drops carry what /debug/requests said while the server held them.
	found := 0
	for _, ev := range eventsOf(evs, ledger.EventDone) {
		if !ev.Outcome.SilentDrop() {
			continue
		}
		var rep judge.DebugReport
		require.NoError(t, json.Unmarshal(ev.ServerDebug, &rep), "%s: server_debug %q", ev.RequestID, ev.ServerDebug)
		if strings.Contains(rep.Where, "hanging") {
			found++
		}
		assert.Positive(t, ev.Age, "%s: silent drop without age", ev.RequestID)
	}
	assert.NotZero(t, found, "no silent drop was located by /debug/requests")
	for _, typ := range []ledger.EventType{ledger.EventRunStart, ledger.EventTarget, ledger.EventDrain,
		ledger.EventLeakCheck, ledger.EventSelfCheck, ledger.EventRunEnd} {
		only(t, evs, typ)
		_, ok := seen.Load(typ)
		assert.True(t, ok, "OnEvent did not see %s", typ)
	}
	lc := only(t, evs, ledger.EventLeakCheck)
	require.NotNil(t, lc.Passed, "leak check: %+v", lc)
	assert.True(t, *lc.Passed, "leak check: %+v", lc)
	dr := only(t, evs, ledger.EventDrain)
	require.NotNil(t, dr.Passed, "drain: %+v", dr)
	assert.True(t, *dr.Passed, "drain: %+v", dr)
	end := only(t, evs, ledger.EventRunEnd)
	assert.Empty(t, end.Error)
	assert.Empty(t, end.Interrupted)
}

func TestSameSeedSameRequestIDs(t *testing.T) {
	ids := func() []string {
		b := newBadServer(t, []string{"ok", "reject"})
		// Which requests run is fixed by counts (turns, an open-loop count), never by
		// how far a loaded machine got before a short window closed: the window is far
		// longer than the work, and the run ends when the workloads are done.
		sc := testScenario(b.srv.URL, 2*time.Minute,
			scenarios.Workload{Name: "agents", Type: "agents", Agents: 3, Turns: 2},
			scenarios.Workload{Name: "ol", Type: "open_loop", Count: 9, Pacer: &scenarios.Pacer{Type: "constant", Rate: 10}})
		generousDeadlines(sc)
		dir := t.TempDir()
		require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
		var out []string
		for _, ev := range eventsOf(readLedger(t, dir), ledger.EventDone) {
			out = append(out, ev.RequestID+":"+string(ev.Outcome))
		}
		sort.Strings(out)
		return out
	}
	first := ids()
	require.Len(t, first, 3*2+9, "every turn and every open-loop request ran: %v", first)
	assert.Equal(t, first, ids())
}

// The leak check says what it found: pass, fail with the residual gauges, or not
// evaluated (never a pass or a fail) when it could not tell.
func TestLeakCheck(t *testing.T) {
	closedURL := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		url := "http://" + ln.Addr().String() + "/metrics"
		ln.Close()
		return url
	}
	noGauges := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "process_cpu_seconds_total 1\n")
	}))
	t.Cleanup(noGauges.Close)
	tests := []struct {
		name       string
		leak       bool
		metricsURL func(t *testing.T, b *badServer) string
		passed     *bool
		detail     string
		residual   map[string]float64
	}{
		{name: "drained", metricsURL: func(t *testing.T, b *badServer) string { return b.srv.URL + "/metrics" },
			passed: ledger.Bool(true), detail: "running and queued gauges at 0"},
		{name: "leak", leak: true, metricsURL: func(t *testing.T, b *badServer) string { return b.srv.URL + "/metrics" },
			passed: ledger.Bool(false), detail: "not drained after",
			residual: map[string]float64{"target/sglang:num_running_reqs": 1}},
		{name: "metrics endpoint never answers", metricsURL: func(t *testing.T, _ *badServer) string { return closedURL(t) },
			detail: "not evaluated: after"},
		{name: "no leak gauge in the answer", metricsURL: func(t *testing.T, _ *badServer) string { return noGauges.URL },
			detail: "not evaluated: after"},
		{name: "no metrics endpoint", metricsURL: func(t *testing.T, _ *badServer) string { return "" },
			detail: "not evaluated: the target has no metrics endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBadServer(t, []string{"ok"})
			b.leak = tt.leak
			sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 3})
			sc.Target.MetricsURL = tt.metricsURL(t, b)
			// Generous: a pass returns at once, and a loaded machine must not turn a slow
			// first scrape into "never answered".
			sc.Drain.LeakTimeout = scenarios.Duration(3 * time.Second)
			dir := t.TempDir()
			require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, LeakPollInterval: 50 * time.Millisecond}))
			lc := only(t, readLedger(t, dir), ledger.EventLeakCheck)
			assert.Equal(t, tt.passed, lc.Passed, "leak check: %+v", lc)
			assert.True(t, strings.HasPrefix(lc.Detail, tt.detail), "detail %q, want it to start with %q", lc.Detail, tt.detail)
			assert.Equal(t, tt.residual, lc.Metrics)
		})
	}
}

func TestUnreachableTargetIsInfrastructure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	err = Run(context.Background(), testScenario(url, time.Second, scenarios.Workload{Type: "burst", Count: 1}), Options{OutDir: dir})
	require.ErrorIs(t, err, ErrInfrastructure)
	end := only(t, readLedger(t, dir), ledger.EventRunEnd)
	assert.Equal(t, err.Error(), end.Error)
	assert.Empty(t, end.Interrupted)
}

func TestSelfCheckMarksRunInvalid(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 20})
	sc.SelfCheck.MaxLag = scenarios.Duration(time.Nanosecond) // no harness can keep this
	dir := t.TempDir()
	err := Run(context.Background(), sc, Options{OutDir: dir})
	require.ErrorIs(t, err, ErrInfrastructure)
	evs := readLedger(t, dir)
	sc1 := only(t, evs, ledger.EventSelfCheck)
	require.NotNil(t, sc1.Passed)
	assert.False(t, *sc1.Passed)
	assert.Positive(t, sc1.LagMax)
	assert.Equal(t, err.Error(), only(t, evs, ledger.EventRunEnd).Error)
}

// Ctrl-C: load stops, in-flight requests get a brief drain, then end
// unresolved_at_interrupt (within their deadlines, so not drops); the
// ledger is complete, says the run was interrupted and why, and leaves the leak check
// not evaluated; Run returns promptly.
func TestCancelStopsRunAndRecordsCancelled(t *testing.T) {
	b := newBadServer(t, []string{"hang"})
	sc := testScenario(b.srv.URL, time.Minute, scenarios.Workload{Name: "agents", Type: "agents", Agents: 4, Turns: 5})
	generousDeadlines(sc) // only the interrupt may end these requests
	cause := errors.New("signal: interrupt")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dir := t.TempDir()
	// Interrupt once every agent's first request is in flight.
	sent := make(chan struct{}, 100)
	onEvent := func(ev ledger.Event) {
		if ev.Type == ledger.EventSent {
			select {
			case sent <- struct{}{}:
			default:
			}
		}
	}
	go func() {
		for range 4 {
			<-sent
		}
		cancel(cause)
	}()
	require.NoError(t, Run(ctx, sc, Options{OutDir: dir, OnEvent: onEvent,
		// The drain timing out is the point (the requests hang); the cancelled requests
		// then get a bound a loaded machine keeps to resolve.
		CancelDrain: 200 * time.Millisecond, ResolveAfterCancel: time.Minute}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeUnresolved: 4}, outcomes)
	dr := only(t, evs, ledger.EventDrain)
	require.NotNil(t, dr.Passed)
	assert.False(t, *dr.Passed)
	assert.Equal(t, 4, dr.InFlight)
	lc := only(t, evs, ledger.EventLeakCheck)
	assert.Nil(t, lc.Passed, "an interrupted run's leak check is not evaluated")
	assert.Equal(t, "not evaluated: the run was interrupted", lc.Detail)
	end := only(t, evs, ledger.EventRunEnd)
	assert.Equal(t, "signal: interrupt", end.Interrupted)
	assert.Empty(t, end.Error)
}

// run_start carries the run's provenance, each note follows it, and the target event
// holds what the target said about itself.
func TestProvenanceNotesAndTarget(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 200*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 1})
	dir := t.TempDir()
	cmd := []string{"harness", "run", "x.yaml"}
	notes := []string{"--semantics does not apply to an external target", "second note"}
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, Notes: notes, CommandLine: cmd}))
	evs := readLedger(t, dir)
	require.GreaterOrEqual(t, len(evs), 3)
	start := evs[0]
	require.Equal(t, ledger.EventRunStart, start.Type)
	require.NotNil(t, start.Provenance)
	p := start.Provenance
	assert.Equal(t, cmd, p.CommandLine)
	assert.NotEmpty(t, p.GoVersion)
	assert.NotEmpty(t, p.OS)
	assert.NotEmpty(t, p.CPU)
	for i, n := range notes {
		assert.Equal(t, ledger.Event{Time: evs[i+1].Time, Type: ledger.EventNote, Message: n}, evs[i+1])
	}
	tgt := only(t, evs, ledger.EventTarget)
	assert.JSONEq(t, `{"object":"list","data":[{"id":"bad-model","object":"model"}]}`, string(tgt.Models))
	assert.Equal(t, "bad-1.2.3", tgt.ServerVersion)
	assert.Equal(t, b.srv.URL, tgt.URL)
}

func TestFaultRunnerSeam(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	// The fault timeline plays out over the whole duration even when the workloads
	// finish early; the window is long enough for a loaded machine to run the fault
	// runner's burst inside it (the runner's ctx ends with the window).
	sc := testScenario(b.srv.URL, 30*time.Second, scenarios.Workload{Name: "agents", Type: "agents", Agents: 2, Turns: 2})
	generousDeadlines(sc)
	sc.Faults = []scenarios.Fault{{Name: "storm", Type: "queue_saturation", Target: "agents", At: scenarios.Duration(100 * time.Millisecond)}}
	var burst, rule chaos.RunStats
	var scraped map[string]float64
	runner := func(ctx context.Context, sc *scenarios.Scenario, env chaos.Env, start time.Time) error {
		env.Emit(ledger.Event{Type: ledger.EventFaultStart, Fault: "storm", FaultType: "queue_saturation", Target: "agents"})
		dis, err := env.Disconnect(ctx, "client", chaos.Disconnect{AfterTokens: 1, Fraction: 1})
		if err != nil {
			return err
		}
		load, err := env.Load(ctx, "agents", chaos.Burst{Requests: 5, Concurrency: 2})
		if err != nil {
			return err
		}
		// Stop cancels what is outstanding: wait until the burst has run its course.
		if !assert.Eventually(t, func() bool { return load.Stats().Done >= 5 }, 30*time.Second, 10*time.Millisecond) {
			return errors.New("the burst did not finish")
		}
		load.Stop()
		burst = load.Stats()
		scraped, err = env.Scrape(ctx, "target")
		if err != nil {
			return err
		}
		if _, err := env.Link("router->decode-0"); !errors.Is(err, chaos.ErrUnsupported) {
			return fmt.Errorf("external target must not offer links: %v", err)
		}
		<-ctx.Done()
		// The workload's own streams come under the rule too, until its last turn: by the
		// end of the window they have all been sent; wait until every one has ended (on a
		// loaded machine one can still be under way).
		if !assert.Eventually(t, func() bool { st := dis.Stats(); return st.Done >= st.Sent }, 30*time.Second, 10*time.Millisecond) {
			return errors.New("a stream under the disconnect rule did not end")
		}
		dis.Stop()
		rule = dis.Stats()
		env.Emit(ledger.Event{Type: ledger.EventFaultStop, Fault: "storm"})
		return nil
	}
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, Faults: runner}))
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	assert.Equal(t, int64(5), burst.Sent)
	assert.Equal(t, int64(5), burst.Cancelled, "burst %+v: want 5 requests cancelled by the disconnect rule", burst)
	// The rule hits every stream while it is on: the burst's, and the workload's own
	// when they are in flight at the time.
	assert.GreaterOrEqual(t, rule.Sent, int64(5), "rule %+v", rule)
	assert.Equal(t, rule.Sent, rule.Cancelled, "rule %+v", rule)
	assert.Contains(t, scraped, "sglang:num_running_reqs")
	only(t, evs, ledger.EventFaultStart)
	only(t, evs, ledger.EventFaultStop)
	// A failing fault runner makes the run invalid.
	bad := func(context.Context, *scenarios.Scenario, chaos.Env, time.Time) error {
		return errors.New("failpoint never hit")
	}
	sc.Duration = scenarios.Duration(200 * time.Millisecond) // the runner fails at once
	err := Run(context.Background(), sc, Options{OutDir: t.TempDir(), Faults: bad})
	require.ErrorIs(t, err, ErrInfrastructure)
}

// The default fault runner is the chaos package's timeline: a client_disconnect fault
// against an external target is applied, verified and reverted, and its cancels are in
// the ledger.
func TestChaosTimelineClientDisconnect(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	// Seconds before, during and after the fault, so that a loaded machine still sends
	// requests in each; requests that should succeed get deadlines it keeps.
	sc := testScenario(b.srv.URL, 8*time.Second, scenarios.Workload{Name: "agents", Type: "agents",
		Agents: 3, Turns: 1000, ThinkTime: scenarios.Duration(20 * time.Millisecond)})
	generousDeadlines(sc)
	sc.Faults = []scenarios.Fault{{Name: "abort", Type: "client_disconnect", Target: "agents",
		At: scenarios.Duration(2 * time.Second), For: scenarios.Duration(4 * time.Second),
		Params: map[string]any{"after_tokens": 1}}}
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	assert.NotZero(t, outcomes[ledger.OutcomeCancelled], "outcomes %v: want some cancelled", outcomes)
	assert.NotZero(t, outcomes[ledger.OutcomeOK], "outcomes %v: want some ok", outcomes)
	only(t, evs, ledger.EventFaultStart)
	only(t, evs, ledger.EventFaultStop)
	v := only(t, evs, ledger.EventFaultVerified)
	require.NotNil(t, v.Passed)
	assert.True(t, *v.Passed, "fault not verified: %+v", v)
}

func TestBadFaultSpecIsTheScenarios(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "agents", Type: "agents", Agents: 1, Turns: 1})
	sc.Faults = []scenarios.Fault{{Name: "x", Type: "no_such_fault", Target: "agents"}}
	err := Run(context.Background(), sc, Options{OutDir: t.TempDir()})
	require.ErrorIs(t, err, chaos.ErrUnknownType)
	assert.NotErrorIs(t, err, ErrInfrastructure)
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{CancelDrain: time.Millisecond}.withDefaults()
	assert.Equal(t, time.Millisecond, o.CancelDrain, "a set field is kept")
	assert.Equal(t, DefaultSampleInterval, o.SampleInterval)
	assert.Equal(t, DefaultLeakPollInterval, o.LeakPollInterval)
	assert.Equal(t, DefaultScrapeTimeout, o.ScrapeTimeout)
	assert.Equal(t, DefaultResolveAfterCancel, o.ResolveAfterCancel)
	assert.Equal(t, DefaultSelfCheckTick, o.SelfCheckTick)
	assert.Equal(t, DefaultDebugTimeout, o.DebugTimeout)
	assert.Equal(t, DefaultNVIDIADevices, o.NVIDIADevices)
	assert.NotNil(t, o.Logger)
	assert.NotNil(t, o.CommandLine)
}
