package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"pdsoak/chaos"
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
		Drain:     scenarios.Drain{Timeout: scenarios.Duration(6 * time.Second), LeakTimeout: scenarios.Duration(2 * time.Second)},
		SelfCheck: scenarios.SelfCheck{MaxLag: scenarios.Duration(5 * time.Second)},
	}
	for i := range sc.Workloads {
		sc.Workloads[i].Stream = true
	}
	return sc
}

func readLedger(t *testing.T, dir string) []ledger.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ledger.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var ev ledger.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
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
			if !ev.Outcome.Valid() {
				t.Errorf("%s: invalid outcome %q", ev.RequestID, ev.Outcome)
			}
			outcomes[ev.Outcome]++
			if ev.Outcome.SilentDrop() && ev.Phase == "" {
				t.Errorf("%s: silent drop without phase", ev.RequestID)
			}
		}
	}
	if len(sched) == 0 {
		t.Fatal("no requests scheduled")
	}
	for id, n := range sched {
		if n != 1 || done[id] != 1 {
			t.Errorf("%s: scheduled %d times, done %d times", id, n, done[id])
		}
	}
	for id := range done {
		if sched[id] == 0 {
			t.Errorf("%s: done without scheduled", id)
		}
	}
	return outcomes
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
	sc := testScenario(b.srv.URL, 1500*time.Millisecond,
		scenarios.Workload{Name: "agents", Type: "agents", Agents: 6, Turns: 3},
		scenarios.Workload{Name: "ol", Type: "open_loop", Pacer: &scenarios.Pacer{Type: "poisson", Rate: 20}},
		scenarios.Workload{Name: "burst", Type: "burst", Count: 15, Start: scenarios.Duration(200 * time.Millisecond)},
	)
	dir := t.TempDir()
	var seen sync.Map
	err := Run(context.Background(), sc, Options{OutDir: dir, OnEvent: func(ev ledger.Event) { seen.Store(ev.Type, true) }})
	if err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	t.Logf("outcomes: %v", outcomes)
	for _, o := range []ledger.Outcome{ledger.OutcomeOK, ledger.OutcomeRejected, ledger.OutcomeStalled,
		ledger.OutcomeDeadlineExceeded, ledger.OutcomeTruncated, ledger.OutcomeInvalid, ledger.OutcomeStreamError,
		ledger.OutcomeHTTPError} {
		if outcomes[o] == 0 {
			t.Errorf("no %s outcome in a mix that includes it", o)
		}
	}
	// Silent drops carry what /debug/requests said while the server held them.
	found := 0
	for _, ev := range eventsOf(evs, ledger.EventDone) {
		if !ev.Outcome.SilentDrop() {
			continue
		}
		var rep DebugReport
		if err := json.Unmarshal(ev.ServerDebug, &rep); err != nil {
			t.Fatalf("%s: server_debug %q: %v", ev.RequestID, ev.ServerDebug, err)
		}
		if strings.Contains(rep.Where, "hanging") {
			found++
		}
		if ev.Age <= 0 {
			t.Errorf("%s: silent drop without age", ev.RequestID)
		}
	}
	if found == 0 {
		t.Error("no silent drop was located by /debug/requests")
	}
	for _, typ := range []ledger.EventType{ledger.EventRunStart, ledger.EventDrain, ledger.EventLeakCheck,
		ledger.EventSelfCheck, ledger.EventRunEnd} {
		if n := len(eventsOf(evs, typ)); n != 1 {
			t.Errorf("%d %s events, want 1", n, typ)
		}
		if _, ok := seen.Load(typ); !ok {
			t.Errorf("OnEvent did not see %s", typ)
		}
	}
	if lc := eventsOf(evs, ledger.EventLeakCheck)[0]; lc.Passed == nil || !*lc.Passed {
		t.Errorf("leak check: %+v", lc)
	}
	if dr := eventsOf(evs, ledger.EventDrain)[0]; dr.Passed == nil || !*dr.Passed {
		t.Errorf("drain: %+v", dr)
	}
}

func TestSameSeedSameRequestIDs(t *testing.T) {
	ids := func() []string {
		b := newBadServer(t, []string{"ok", "reject"})
		sc := testScenario(b.srv.URL, time.Second,
			scenarios.Workload{Name: "agents", Type: "agents", Agents: 3, Turns: 2},
			scenarios.Workload{Name: "ol", Type: "open_loop", Pacer: &scenarios.Pacer{Type: "constant", Rate: 10}})
		dir := t.TempDir()
		if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range eventsOf(readLedger(t, dir), ledger.EventDone) {
			out = append(out, ev.RequestID+":"+string(ev.Outcome))
		}
		sort.Strings(out)
		return out
	}
	a, b := ids(), ids()
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("runs differ:\n%v\n%v", a, b)
	}
}

func TestLeakCheckFails(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	b.leak = true
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 3})
	sc.Drain.LeakTimeout = scenarios.Duration(600 * time.Millisecond)
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	lc := eventsOf(readLedger(t, dir), ledger.EventLeakCheck)
	if len(lc) != 1 || lc[0].Passed == nil || *lc[0].Passed || lc[0].Metrics["target/sglang:num_running_reqs"] != 1 {
		t.Fatalf("leak check: %+v", lc)
	}
}

func TestUnreachableTargetIsInfrastructure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	err = Run(context.Background(), testScenario(url, time.Second, scenarios.Workload{Type: "burst", Count: 1}), Options{OutDir: dir})
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("err = %v, want ErrInfrastructure", err)
	}
	evs := readLedger(t, dir)
	if end := eventsOf(evs, ledger.EventRunEnd); len(end) != 1 || end[0].Error == "" {
		t.Fatalf("run_end: %+v", end)
	}
}

func TestSelfCheckMarksRunInvalid(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "b", Type: "burst", Count: 20})
	sc.SelfCheck.MaxLag = scenarios.Duration(time.Nanosecond) // no harness can keep this
	dir := t.TempDir()
	err := Run(context.Background(), sc, Options{OutDir: dir})
	if !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("err = %v, want ErrInfrastructure", err)
	}
	sc1 := eventsOf(readLedger(t, dir), ledger.EventSelfCheck)
	if len(sc1) != 1 || sc1[0].Passed == nil || *sc1[0].Passed || sc1[0].LagMax <= 0 {
		t.Fatalf("self_check: %+v", sc1)
	}
}

// Ctrl-C: load stops, in-flight requests get a brief drain, then end cancelled; the
// ledger is complete and Run returns promptly.
func TestCancelStopsRunAndRecordsCancelled(t *testing.T) {
	b := newBadServer(t, []string{"hang"})
	sc := testScenario(b.srv.URL, time.Minute, scenarios.Workload{Name: "agents", Type: "agents", Agents: 4, Turns: 5})
	sc.Deadlines.FirstToken = scenarios.Duration(time.Minute)
	sc.Deadlines.Total = scenarios.Duration(time.Minute)
	old := CancelDrain
	CancelDrain = 200 * time.Millisecond
	defer func() { CancelDrain = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	if err := Run(ctx, sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Fatalf("Run took %v after cancel", el)
	}
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	if outcomes[ledger.OutcomeCancelled] != 4 {
		t.Fatalf("outcomes %v, want 4 cancelled", outcomes)
	}
	if dr := eventsOf(evs, ledger.EventDrain); len(dr) != 1 || *dr[0].Passed || dr[0].InFlight != 4 {
		t.Fatalf("drain: %+v", dr)
	}
}

func TestFaultRunnerSeam(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 800*time.Millisecond, scenarios.Workload{Name: "agents", Type: "agents", Agents: 2, Turns: 2})
	// The fault timeline plays out over the whole duration even when the workloads
	// finish early.
	sc.Faults = []scenarios.Fault{{Name: "storm", Type: "queue_saturation", Target: "agents", At: scenarios.Duration(100 * time.Millisecond)}}
	var burst, rule chaos.RunStats
	var scraped map[string]float64
	runner := func(ctx context.Context, sc *scenarios.Scenario, env chaos.Env, start time.Time) error {
		time.Sleep(time.Until(start.Add(sc.Faults[0].At.D())))
		env.Emit(ledger.Event{Type: ledger.EventFaultStart, Fault: "storm", FaultType: "queue_saturation", Target: "agents"})
		dis, err := env.Disconnect(ctx, "client", chaos.Disconnect{AfterTokens: 1, Fraction: 1})
		if err != nil {
			return err
		}
		load, err := env.Load(ctx, "agents", chaos.Burst{Requests: 5, Concurrency: 2})
		if err != nil {
			return err
		}
		for i := 0; i < 500 && load.Stats().Done < 5; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		load.Stop()
		dis.Stop()
		burst, rule = load.Stats(), dis.Stats()
		scraped, err = env.Scrape(ctx, "target")
		if err != nil {
			return err
		}
		if _, err := env.Link("router->decode-0"); !errors.Is(err, chaos.ErrUnsupported) {
			return fmt.Errorf("external target must not offer links: %v", err)
		}
		<-ctx.Done()
		env.Emit(ledger.Event{Type: ledger.EventFaultStop, Fault: "storm"})
		return nil
	}
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir, Faults: runner}); err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	checkOneTerminal(t, evs)
	if burst.Sent != 5 || burst.Cancelled != 5 || rule.Sent != 5 || rule.Cancelled != 5 {
		t.Fatalf("burst %+v rule %+v: want 5 requests cancelled by the disconnect rule", burst, rule)
	}
	if _, ok := scraped["sglang:num_running_reqs"]; !ok {
		t.Fatalf("scrape: %v", scraped)
	}
	if len(eventsOf(evs, ledger.EventFaultStart)) != 1 || len(eventsOf(evs, ledger.EventFaultStop)) != 1 {
		t.Fatal("fault events missing")
	}
	// A failing fault runner makes the run invalid.
	bad := func(context.Context, *scenarios.Scenario, chaos.Env, time.Time) error {
		return errors.New("failpoint never hit")
	}
	if err := Run(context.Background(), sc, Options{OutDir: t.TempDir(), Faults: bad}); !errors.Is(err, ErrInfrastructure) {
		t.Fatalf("err = %v, want ErrInfrastructure", err)
	}
}

// The default fault runner is the chaos package's timeline: a client_disconnect fault
// against an external target is applied, verified and reverted, and its cancels are in
// the ledger.
func TestChaosTimelineClientDisconnect(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 1200*time.Millisecond, scenarios.Workload{Name: "agents", Type: "agents",
		Agents: 3, Turns: 1000, ThinkTime: scenarios.Duration(20 * time.Millisecond)})
	sc.Faults = []scenarios.Fault{{Name: "abort", Type: "client_disconnect", Target: "agents",
		At: scenarios.Duration(200 * time.Millisecond), For: scenarios.Duration(600 * time.Millisecond),
		Params: map[string]any{"after_tokens": 1}}}
	dir := t.TempDir()
	if err := Run(context.Background(), sc, Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	if outcomes[ledger.OutcomeCancelled] == 0 || outcomes[ledger.OutcomeOK] == 0 {
		t.Fatalf("outcomes %v: want some ok and some cancelled", outcomes)
	}
	for _, typ := range []ledger.EventType{ledger.EventFaultStart, ledger.EventFaultVerified, ledger.EventFaultStop} {
		if evs := eventsOf(evs, typ); len(evs) != 1 {
			t.Fatalf("%d %s events", len(evs), typ)
		}
	}
	if v := eventsOf(evs, ledger.EventFaultVerified)[0]; v.Passed == nil || !*v.Passed {
		t.Fatalf("fault not verified: %+v", v)
	}
}

func TestBadFaultSpecIsTheScenarios(t *testing.T) {
	b := newBadServer(t, []string{"ok"})
	sc := testScenario(b.srv.URL, 300*time.Millisecond, scenarios.Workload{Name: "agents", Type: "agents", Agents: 1, Turns: 1})
	sc.Faults = []scenarios.Fault{{Name: "x", Type: "no_such_fault", Target: "agents"}}
	err := Run(context.Background(), sc, Options{OutDir: t.TempDir()})
	if err == nil || errors.Is(err, ErrInfrastructure) || !errors.Is(err, chaos.ErrUnknownType) {
		t.Fatalf("err = %v, want chaos.ErrUnknownType and not ErrInfrastructure", err)
	}
}
