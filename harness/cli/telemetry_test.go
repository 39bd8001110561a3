package cli

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"pdsoak/dashboards"
	"pdsoak/harness"
	"pdsoak/harness/telemetry"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// freeAddr is a loopback address nothing listens on (the listener is closed at once;
// nothing else on this machine binds ports at random in the meantime, in practice).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// writeChat answers a chat completion with a short, complete SSE stream.
func writeChat(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i, fin := range []string{"null", `"length"`} {
		fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","model":"ref","choices":[{"index":0,"delta":{"content":"t%d "},"finish_reason":%s}]}`+"\n\n", i, fin)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// scrapeSums GETs a /metrics page and sums each series over its labels (histograms:
// their sample count, as NAME_count).
func scrapeSums(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out, nil
}

// TestMetricsListenDuringRun runs the real harness against a server that scrapes the
// harness's --metrics-listen endpoint from inside every request it serves: the series
// move while the run is on, the request being served is always in flight, and every
// request arrives with the traceparent the ledger's trace_id names.
func TestMetricsListenDuringRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness for a few seconds")
	}
	metrics := "http://" + freeAddr(t) + "/metrics"
	var mu sync.Mutex
	var scrapes []map[string]float64
	var scrapeErrs []error
	tps := map[string]string{} // X-Request-ID -> traceparent
	srv := fakeOpenAI(t, 1, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock() // scrapes in the order they are recorded
		s, err := scrapeSums(metrics)
		scrapes, scrapeErrs = append(scrapes, s), append(scrapeErrs, err)
		tps[r.Header.Get("X-Request-ID")] = r.Header.Get("traceparent")
		mu.Unlock()
		writeChat(w)
	})
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := execute(t, []string{"run", e2eScenario(t, false), "--target", srv.URL, "--out", out,
		"--metrics-listen", strings.TrimSuffix(strings.TrimPrefix(metrics, "http://"), "/metrics"), "--seed", "11"}, WithRunner(harnessRun))
	require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "harness: live metrics on "+metrics)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, scrapes, 12, "4 agents × 3 turns")
	for i, err := range scrapeErrs {
		require.NoError(t, err, "scrape %d", i)
	}
	first, last := scrapes[0], scrapes[len(scrapes)-1]
	for i, s := range scrapes {
		assert.GreaterOrEqual(t, s["pdsoak_in_flight"], 1.0, "scrape %d: the request being served is in flight", i)
		assert.Equal(t, 1.0, s["pdsoak_run_info"])
		if i > 0 {
			assert.GreaterOrEqual(t, s["pdsoak_requests_total"], scrapes[i-1]["pdsoak_requests_total"], "a counter never goes back")
		}
	}
	assert.Zero(t, first["pdsoak_requests_total"], "nothing resolved before the first request")
	assert.Greater(t, last["pdsoak_requests_total"], first["pdsoak_requests_total"], "requests_total moved during the run")
	assert.Greater(t, last["pdsoak_e2e_seconds_count"], 0.0)
	assert.Greater(t, last["pdsoak_ttft_seconds_count"], 0.0)
	assert.Greater(t, last["pdsoak_harness_lag_seconds_count"], 0.0)
	_, err := http.Get(metrics)
	assert.Error(t, err, "the listener is closed once the reports are written")

	// Every request carried a traceparent: the one derived from the seed and its id, and
	// its trace id is on the request's done event.
	evs := readEvents(t, filepath.Join(out, ledger.EventsFile))
	dones := 0
	for _, ev := range evs {
		if ev.Type != ledger.EventDone && ev.Type != ledger.EventScheduled {
			continue
		}
		dones++
		tp := traceparent.Derive(11, ev.RequestID)
		assert.Equal(t, tp.String(), tps[ev.RequestID], "%s: the header the server saw", ev.RequestID)
		assert.Equal(t, tp.TraceIDHex(), ev.TraceID, "%s %s: trace_id in the ledger", ev.RequestID, ev.Type)
	}
	assert.Equal(t, 24, dones)
}

func readEvents(t *testing.T, path string) []ledger.Event {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []ledger.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev ledger.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		out = append(out, ev)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestTelemetryFlagErrors(t *testing.T) {
	good := writeFile(t, t.TempDir(), "good.yaml", "name: good\nduration: 5s\nworkloads:\n  - type: agents\n    agents: 2\n    turns: 1\n")
	never := WithRunner(func(context.Context, *scenarios.Scenario, RunOptions) error {
		t.Error("the run must not start")
		return nil
	})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"listen without port", []string{"--metrics-listen", "localhost"}, `--metrics-listen "localhost": want host:port`},
		{"listen on a busy port", []string{"--metrics-listen", busy.Addr().String()}, "telemetry: metrics listener"},
		{"remote write not a URL", []string{"--prometheus-remote-write", "prometheus:9090"}, "--prometheus-remote-write \"prometheus:9090\": want an http:// or https:// URL"},
		{"otlp without host", []string{"--otlp-endpoint", "http://"}, "--otlp-endpoint"},
		{"instance without remote write", []string{"--remote-write-instance", "ci-7"}, `--remote-write-instance "ci-7": needs --prometheus-remote-write`},
		{"instance not UTF-8", []string{"--prometheus-remote-write", "http://127.0.0.1:1/api/v1/write", "--remote-write-instance", "a\xffb"}, "--remote-write-instance \"a\\xffb\": not UTF-8"},
		{"zero interval", []string{"--prometheus-remote-write", "http://127.0.0.1:1/api/v1/write", "--remote-write-interval", "0s"}, "--remote-write-interval 0s: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := execute(t, append([]string{"run", good, "--out", filepath.Join(t.TempDir(), "o"), "-q"}, tt.args...), never)
			assert.Equal(t, ExitUsage, code, stdout)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

// TestPrometheusRemoteWriteMatchesResults pushes a real run to a real Prometheus
// (Debian's prometheus package, on loopback, with its remote-write receiver on) and
// compares what Prometheus stored with results.json, exactly.
func TestPrometheusRemoteWriteMatchesResults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus and runs the real harness")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("SKIPPED, not passed: no prometheus binary on PATH (apt-get install -y prometheus; .ci/run installs it)")
	}
	prom := startPrometheus(t, bin)

	srv := fakeOpenAI(t, 3, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"message":"overloaded","type":"overloaded","code":503}}`)
	})
	// Two runs of one scenario push at once, as two CI jobs or a nightly on two machines
	// do: each with an instance of its own, so Prometheus holds both runs whole. With
	// one instance for both, Prometheus kept one counter that each run overwrote in turn
	// (a query saw 12 of the 36 requests).
	sc := e2eScenario(t, false)
	results := make([]reports.Results, 2)
	var wg sync.WaitGroup
	for i, inst := range []string{"ci-a", "ci-b"} {
		wg.Go(func() {
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := execute(t, []string{"run", sc, "--target", srv.URL, "--out", out, "-q",
				"--prometheus-remote-write", prom + "/api/v1/write", "--remote-write-interval", "300ms",
				"--remote-write-instance", inst, "--label", "abc123", "--seed", "5"},
				WithRunner(harnessRun))
			if assert.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr) {
				assert.NotContains(t, stderr, "telemetry", "every push was accepted")
				results[i] = readResults(t, out)
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())

	for i, inst := range []string{"ci-a", "ci-b"} {
		res := results[i]
		byOutcome := map[string]float64{}
		for _, s := range promQuery(t, prom, `sum by (outcome) (pdsoak_requests_total{scenario="e2e",instance="`+inst+`"})`) {
			byOutcome[s.labels["outcome"]] = s.value
		}
		want := map[string]float64{}
		total := 0
		for o, n := range res.Outcomes {
			total += n
			if n > 0 {
				want[string(o)] = float64(n)
			}
		}
		require.Positive(t, total, "the run sent requests (how many depends on the machine: the comparison is what matters)")
		assert.Equal(t, want, byOutcome, "Prometheus has %s's results.json outcome counts", inst)
		assert.NotZero(t, want["rejected"], "the run had refusals: the comparison covers more than one outcome")

		one := func(q string) float64 {
			s := promQuery(t, prom, q)
			require.Len(t, s, 1, q)
			return s[0].value
		}
		sel := `{instance="` + inst + `"}`
		assert.Equal(t, float64(total), one(`sum(pdsoak_e2e_seconds_count`+sel+`)`), "one e2e sample per request")
		assert.Equal(t, float64(res.SilentDrops), one(`sum(pdsoak_silent_drops_total`+sel+`) or vector(0)`))
		assert.Equal(t, 0.0, one(`sum(pdsoak_in_flight`+sel+`)`), "nothing in flight at the final push")
	}
	info := promQuery(t, prom, `pdsoak_run_info`)
	require.Len(t, info, 2, "one run_info per run")
	for _, s := range info {
		assert.Contains(t, []string{"ci-a", "ci-b"}, s.labels["instance"])
		delete(s.labels, "instance")
		assert.Equal(t, map[string]string{"__name__": "pdsoak_run_info", "scenario": "e2e", "seed": "5", "label": "abc123", "job": "pdsoak"}, s.labels)
	}

	// Every query of the shipped Grafana dashboard is PromQL this Prometheus runs, over
	// the series this run stored.
	qs, err := dashboards.Queries(dashboards.PDSoak)
	require.NoError(t, err)
	vars := strings.NewReplacer("$__rate_interval", "1m", "$scenario", "e2e")
	answered := 0
	for _, q := range qs {
		if len(promQuery(t, prom, vars.Replace(q.Expr))) > 0 {
			answered++
		}
	}
	t.Logf("%d of %d dashboard queries returned data", answered, len(qs))
	assert.Greater(t, answered, len(qs)/2, "most dashboard queries have data after a run")
}

// startPrometheus runs Prometheus on a loopback port with an empty scrape config and
// the remote-write receiver, and returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "prometheus.yml", "global:\n  scrape_interval: 1h\nscrape_configs: []\n")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); logf.Close() })
	base := "http://" + addr
	// Bounded wait for readiness (a bound, not a timed assertion).
	for i := 0; ; i++ {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if i == 600 {
			log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("prometheus not ready after 60s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type promSample struct {
	labels map[string]string
	value  float64
}

// promQuery runs an instant query through the HTTP API.
func promQuery(t *testing.T, base, q string) []promSample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", q, body)
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	require.NoError(t, json.Unmarshal(body, &r), string(body))
	var out []promSample
	for _, x := range r.Data.Result {
		v, err := strconv.ParseFloat(x.Value[1].(string), 64)
		require.NoError(t, err)
		out = append(out, promSample{labels: x.Metric, value: v})
	}
	return out
}

// tracingGen is a gen.Generator and gen.Inspector: every request, once admitted, asks
// the server's own /debug/requests what it says about itself, then answers "ok".
type tracingGen struct {
	url func() string
	mu  sync.Mutex
	in  map[string]bool
	saw map[string]string // request id -> trace_id in /debug/requests while it was in flight
}

func (g *tracingGen) Requests() []gen.RequestInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gen.RequestInfo
	for id := range g.in {
		out = append(out, gen.RequestInfo{ID: id, Stage: "running"})
	}
	return out
}

func (g *tracingGen) Healthy() error { return nil }

func (g *tracingGen) Generate(ctx context.Context, req *gen.Request) (<-chan gen.Event, error) {
	g.mu.Lock()
	g.in[req.ID] = true
	g.mu.Unlock()
	ch := make(chan gen.Event, 2)
	go func() {
		defer close(ch)
		var dr api.DebugRequests
		if resp, err := http.Get(g.url() + "/debug/requests"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&dr)
			resp.Body.Close()
		}
		g.mu.Lock()
		for _, r := range dr.Requests {
			if r.ID == req.ID {
				g.saw[req.ID] = r.TraceID
			}
		}
		delete(g.in, req.ID)
		g.mu.Unlock()
		ch <- gen.Event{Tokens: []int{'o', 'k'}}
		ch <- gen.Event{Done: true, Finish: "length", PromptTokens: len(req.Prompt), CompletionTokens: 2}
	}()
	return ch, nil
}

// TestTraceIDInTheReferenceServersDebugView runs the real harness against the
// reference server's HTTP layer: for every request, the trace id /debug/requests showed
// while the server held it is the trace_id the harness wrote in its ledger.
func TestTraceIDInTheReferenceServersDebugView(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness for a few seconds")
	}
	g := &tracingGen{in: map[string]bool{}, saw: map[string]string{}}
	srv := httptest.NewServer(api.New(g, api.WithLogger(slog.New(slog.DiscardHandler))))
	t.Cleanup(srv.Close)
	g.url = func() string { return srv.URL }
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := execute(t, []string{"run", e2eScenario(t, false), "--target", srv.URL, "--out", out, "-q", "--seed", "21"}, WithRunner(harnessRun))
	require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, ev := range readEvents(t, filepath.Join(out, ledger.EventsFile)) {
		if ev.Type != ledger.EventDone {
			continue
		}
		n++
		require.NotEmpty(t, ev.TraceID)
		assert.Equal(t, ev.TraceID, g.saw[ev.RequestID], "%s: the server's debug view names the ledger's trace", ev.RequestID)
	}
	assert.Equal(t, 12, n)
}

// TestOTLPSpansOfARealRun: --otlp-endpoint exports one span per request of a real run to
// an in-process OTLP/HTTP receiver, each with the trace id the ledger records and the
// span id the request's traceparent named as its parent.
func TestOTLPSpansOfARealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness for a few seconds")
	}
	var mu sync.Mutex
	spans := map[string][2]string{} // request id -> trace id, span id
	headers := map[string]string{}  // request id -> traceparent the target saw
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					for _, kv := range sp.GetAttributes() {
						if kv.GetKey() == "pdsoak.request_id" {
							spans[kv.GetValue().GetStringValue()] = [2]string{hex.EncodeToString(sp.GetTraceId()), hex.EncodeToString(sp.GetSpanId())}
						}
					}
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(recv.Close)
	srv := fakeOpenAI(t, 1, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers[r.Header.Get("X-Request-ID")] = r.Header.Get("traceparent")
		mu.Unlock()
		writeChat(w)
	})
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := execute(t, []string{"run", e2eScenario(t, false), "--target", srv.URL, "--out", out, "-q",
		"--otlp-endpoint", recv.URL}, WithRunner(harnessRun))
	require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
	assert.NotContains(t, stderr, "telemetry")
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, ev := range readEvents(t, filepath.Join(out, ledger.EventsFile)) {
		if ev.Type != ledger.EventDone {
			continue
		}
		n++
		sp, ok := spans[ev.RequestID]
		require.True(t, ok, "%s: no span", ev.RequestID)
		assert.Equal(t, ev.TraceID, sp[0], "%s: the span's trace is the ledger's", ev.RequestID)
		assert.Equal(t, "00-"+sp[0]+"-"+sp[1]+"-01", headers[ev.RequestID], "%s: the server's parent is the harness's span", ev.RequestID)
	}
	assert.Equal(t, 12, n)
	assert.Len(t, spans, 12)
}

func TestTelemetryConfigLabels(t *testing.T) {
	sc := &scenarios.Scenario{Name: "s", Seed: 4}
	f := telemetryFlags{listen: "127.0.0.1:0", interval: time.Second}
	c, err := f.config(sc, harness.Shard{Index: 2, Count: 3}, "abc", nil)
	require.NoError(t, err)
	assert.Equal(t, telemetry.Labels{Scenario: "s", Seed: 4, Label: "abc", Shard: "2"}, c.Labels)
	c, err = f.config(sc, harness.Shard{}, "", nil)
	require.NoError(t, err)
	assert.Empty(t, c.Labels.Shard, "a whole run has no shard label")
	c, err = (&telemetryFlags{}).config(sc, harness.Shard{}, "", nil)
	require.NoError(t, err)
	assert.False(t, c.Enabled())
}
