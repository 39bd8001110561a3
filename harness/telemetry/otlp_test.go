package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"pdsoak/traceparent"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver on loopback (protobuf bodies,
// as otlptracehttp sends them).
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
	paths    []string
}

func (o *otlpReceiver) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var req coltrace.ExportTraceServiceRequest
		if !assert.NoError(t, proto.Unmarshal(body, &req), "content type %s", r.Header.Get("Content-Type")) {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		o.paths = append(o.paths, r.URL.Path)
		for _, rs := range req.GetResourceSpans() {
			o.resource = map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				o.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				o.spans = append(o.spans, ss.GetSpans()...)
			}
		}
		o.mu.Unlock()
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func attrs(sp *tracepb.Span) map[string]any {
	out := map[string]any{}
	for _, kv := range sp.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetArrayValue() != nil:
			var xs []string
			for _, e := range v.GetArrayValue().GetValues() {
				xs = append(xs, e.GetStringValue())
			}
			out[kv.GetKey()] = xs
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		case v.GetIntValue() != 0:
			out[kv.GetKey()] = v.GetIntValue()
		default:
			out[kv.GetKey()] = v.GetDoubleValue()
		}
	}
	return out
}

func TestTracerExportsOneSpanPerRequest(t *testing.T) {
	rc := &otlpReceiver{}
	srv := rc.start(t)
	tel, err := Start(context.Background(), Config{OTLPEndpoint: srv.URL, Labels: Labels{Scenario: "s", Seed: 7, Label: "L"}})
	require.NoError(t, err)
	feed(tel)
	require.NoError(t, tel.Close(context.Background()), "close flushes the batch")

	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Equal(t, []string{"/v1/traces"}, rc.paths)
	assert.Equal(t, ServiceName, rc.resource["service.name"])
	assert.Equal(t, "s", rc.resource["pdsoak.scenario"])
	require.Len(t, rc.spans, 3, "one span per done event")
	byID := map[string]*tracepb.Span{}
	for _, sp := range rc.spans {
		byID[attrs(sp)["pdsoak.request_id"].(string)] = sp
	}
	for id, sp := range byID {
		tp := traceparent.Derive(7, id)
		assert.Equal(t, tp.TraceIDHex(), hex.EncodeToString(sp.GetTraceId()), "%s: the traceparent's trace id", id)
		assert.Equal(t, tp.SpanIDHex(), hex.EncodeToString(sp.GetSpanId()), "%s: the traceparent's parent id is this span", id)
		assert.Empty(t, sp.GetParentSpanId(), "the harness's span is the root")
		assert.Equal(t, SpanName, sp.GetName())
		assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, sp.GetKind())
	}
	ok, rej, drop := attrs(byID["a-1"]), attrs(byID["o-1"]), attrs(byID["o-3"])
	assert.Equal(t, "ok", ok["pdsoak.outcome"])
	assert.Equal(t, 0.3, ok["pdsoak.ttft_seconds"])
	assert.Equal(t, []string{"kill-decode"}, ok["pdsoak.faults"], "the fault started during the request")
	assert.Equal(t, tracepb.Status_STATUS_CODE_OK, byID["a-1"].GetStatus().GetCode())
	assert.Equal(t, "refused", rej["pdsoak.cause"])
	assert.Equal(t, int64(503), rej["http.response.status_code"])
	assert.Equal(t, "unexplained", drop["pdsoak.cause"])
	assert.Equal(t, "mid_stream", drop["pdsoak.phase"])
	assert.Nil(t, drop["pdsoak.faults"], "the fault had been reverted before the request was sent")
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, byID["o-3"].GetStatus().GetCode())
	assert.Equal(t, "stalled", byID["o-3"].GetStatus().GetMessage())
	// The span covers the request: from sent (done - e2e) to done.
	d := byID["o-3"].GetEndTimeUnixNano() - byID["o-3"].GetStartTimeUnixNano()
	assert.Equal(t, uint64(500_000_000), d)
}

func TestStartRefusesABadListenAddress(t *testing.T) {
	_, err := Start(context.Background(), Config{MetricsListen: "nohost:-1", RemoteWrite: "http://127.0.0.1:1"})
	require.ErrorContains(t, err, "telemetry: metrics listener")
	assert.False(t, Config{}.Enabled())
	var nilT *Telemetry
	nilT.Observe(ledgerDone())
	assert.NoError(t, nilT.Close(context.Background()))
	assert.Equal(t, "", nilT.MetricsAddr())
}

// A collector slower than the run: the SDK's span queue (2048) fills and it drops the
// rest without a word. The harness's Close says how many of the run's spans never
// reached the collector, instead of a trace backend that silently lacks them.
func TestTracerSaysWhenSpansWereDropped(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	var mu sync.Mutex
	got := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release // the collector answers nothing until the run has sent everything
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var req coltrace.ExportTraceServiceRequest
		require.NoError(t, proto.Unmarshal(body, &req))
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				got += len(ss.GetSpans())
			}
		}
		mu.Unlock()
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	tr, err := NewTracer(context.Background(), srv.URL, Labels{Scenario: "s", Seed: 1}, nil)
	require.NoError(t, err)
	const n = 5000 // more than one export in flight, a batch and the queue hold
	for i := range n {
		ev := ledgerDone()
		ev.RequestID = fmt.Sprintf("r-%d", i)
		tr.Observe(ev)
	}
	open()
	err = tr.Close(context.Background())
	mu.Lock()
	defer mu.Unlock()
	require.Less(t, got, n, "the SDK dropped spans (else this test shows nothing)")
	require.Error(t, err, "%d of %d spans reached the collector and Close said nothing", got, n)
	assert.ErrorContains(t, err, fmt.Sprintf("%d of %d spans", n-got, n))
}

// --label is whatever the command line held (a branch name in a legacy encoding, say): a
// byte string that is not UTF-8 must neither panic the registry (client_golang refuses
// such a label value) nor make every OTLP export fail (protobuf strings are UTF-8).
func TestLabelThatIsNotUTF8(t *testing.T) {
	rc := &otlpReceiver{}
	srv := rc.start(t)
	rw := &receiver{}
	rws := rw.start(t)
	l := Labels{Scenario: "s", Seed: 7, Label: "feature/caf\xe9"}
	tel, err := Start(context.Background(), Config{MetricsListen: "127.0.0.1:0", RemoteWrite: rws.URL,
		RemoteWriteInterval: time.Hour, OTLPEndpoint: srv.URL, Labels: l})
	require.NoError(t, err)
	feed(tel)
	assert.Equal(t, 3.0, scrape(t, "http://"+tel.MetricsAddr()+"/metrics")[SeriesRequests])
	require.NoError(t, tel.Close(context.Background()))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	assert.Len(t, rc.spans, 3, "the spans were exported")
	assert.Equal(t, "feature/caf\uFFFD", rc.resource["pdsoak.label"])
	rw.mu.Lock()
	defer rw.mu.Unlock()
	require.Len(t, rw.pushes, 1, "the final push")
	for _, ts := range rw.pushes[0] {
		if ts.get("__name__") == SeriesRunInfo {
			assert.Equal(t, "feature/caf\uFFFD", ts.get("label"))
		}
	}
}
