package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"pdsoak/ledger"
	"pdsoak/traceparent"
)

// ServiceName is the OTLP service.name of the harness's spans.
const ServiceName = "pdsoak-harness"

// SpanName is the name of the one span per request.
const SpanName = "pdsoak.request"

// Tracer exports one client span per request over OTLP/HTTP, built from the request's
// done event. The span's trace id and span id are the ones the request's traceparent
// carried (traceparent.Derive of the seed and request id), so the server's spans,
// parented on that traceparent, sit under it in the tracing backend.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	seed int64
	exp  *countingExporter
	// ended counts the spans handed to the SDK, which drops what its queue cannot hold
	// (a collector slower than the run) without a word; Close compares it with exp's.
	ended atomic.Int64

	mu     sync.Mutex
	faults []faultWindow
}

type faultWindow struct {
	name, typ  string
	start, end time.Time // end zero: still active
}

// NewTracer exports to endpoint, an OTLP/HTTP base or traces URL (http://host:4318 or
// http://host:4318/v1/traces). Spans are batched; Close flushes them. Export errors
// during the run go to log (nil: discarded) instead of the SDK's default, the standard
// logger on stderr, which would break into the console's status line.
func NewTracer(ctx context.Context, endpoint string, l Labels, log *slog.Logger) (*Tracer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l = l.valid()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OTLP export failed", "err", err) }))
	url := strings.TrimRight(endpoint, "/")
	if !strings.HasSuffix(url, "/v1/traces") {
		url += "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter %q: %w", endpoint, err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", ServiceName),
		attribute.String("pdsoak.scenario", l.Scenario), attribute.Int64("pdsoak.seed", l.Seed)}
	if l.Label != "" {
		attrs = append(attrs, attribute.String("pdsoak.label", l.Label))
	}
	if l.Shard != "" {
		attrs = append(attrs, attribute.String("pdsoak.shard", l.Shard))
	}
	cexp := &countingExporter{SpanExporter: exp}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(cexp), sdktrace.WithIDGenerator(requestIDs{}),
		sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithResource(resource.NewSchemaless(attrs...)))
	return &Tracer{tp: tp, tr: tp.Tracer("pdsoak/harness/telemetry"), seed: l.Seed, exp: cexp}, nil
}

// Observe tracks fault windows and turns each done event into a span.
func (t *Tracer) Observe(ev ledger.Event) {
	switch ev.Type {
	case ledger.EventFaultStart:
		t.mu.Lock()
		t.faults = append(t.faults, faultWindow{name: ev.Fault, typ: ev.FaultType, start: ev.Time})
		t.mu.Unlock()
	case ledger.EventFaultStop:
		t.mu.Lock()
		for i := range t.faults {
			if f := &t.faults[i]; f.name == ev.Fault && f.end.IsZero() {
				f.end = ev.Time
			}
		}
		t.mu.Unlock()
	case ledger.EventDone:
		t.span(ev)
	}
}

// faultsDuring names the faults active at any time in [start, end].
func (t *Tracer) faultsDuring(start, end time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, f := range t.faults {
		if !f.start.After(end) && (f.end.IsZero() || !f.end.Before(start)) {
			out = append(out, f.name)
		}
	}
	sort.Strings(out)
	return out
}

func (t *Tracer) span(ev ledger.Event) {
	start := ev.Time.Add(-time.Duration(ev.E2E * float64(time.Second)))
	ctx := traceparent.NewContext(context.Background(), traceparent.Derive(t.seed, ev.RequestID))
	attrs := []attribute.KeyValue{
		attribute.String("pdsoak.request_id", ev.RequestID),
		attribute.String("pdsoak.workload", ev.Workload),
		attribute.String("pdsoak.outcome", string(ev.Outcome)),
		attribute.String("pdsoak.cause", ev.Cause),
		attribute.Float64("pdsoak.ttft_seconds", ev.TTFT),
		attribute.StringSlice("pdsoak.faults", t.faultsDuring(start, ev.Time)),
	}
	if ev.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", ev.Status))
	}
	if ev.Phase != "" {
		attrs = append(attrs, attribute.String("pdsoak.phase", string(ev.Phase)))
	}
	_, sp := t.tr.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
		trace.WithAttributes(attrs...))
	if ev.Outcome != ledger.OutcomeOK {
		sp.SetStatus(codes.Error, string(ev.Outcome))
	} else {
		sp.SetStatus(codes.Ok, "")
	}
	sp.End(trace.WithTimestamp(ev.Time))
	t.ended.Add(1)
}

// Close flushes the spans still batched and stops the exporter, within ctx. Spans that
// never reached the collector (dropped, or not flushed in time) are an error that says
// how many.
func (t *Tracer) Close(ctx context.Context) error {
	err := t.tp.Shutdown(ctx)
	if lost, n := t.ended.Load()-t.exp.exported.Load(), t.ended.Load(); lost > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d spans were not exported (the collector was too slow or unreachable)", lost, n))
	}
	if err != nil {
		return fmt.Errorf("telemetry: OTLP: %w", err)
	}
	return nil
}

// countingExporter counts the spans the collector accepted.
type countingExporter struct {
	sdktrace.SpanExporter
	exported atomic.Int64
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.exported.Add(int64(len(spans)))
	}
	return err
}

// requestIDs gives a span the ids of the request's traceparent, which the context
// carries; the SDK's own ids would not match the header the server saw.
type requestIDs struct{}

func (requestIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tp, ok := traceparent.FromContext(ctx); ok {
		return trace.TraceID(tp.TraceID), trace.SpanID(tp.SpanID)
	}
	var tid trace.TraceID
	_, _ = rand.Read(tid[:])
	return tid, randomSpanID()
}

func (requestIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if tp, ok := traceparent.FromContext(ctx); ok {
		return trace.SpanID(tp.SpanID)
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}
