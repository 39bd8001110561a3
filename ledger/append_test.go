package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonLine is what the writer wrote before appendEvent: json.Encoder's line.
func jsonLine(t testing.TB, ev *Event) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	err := json.NewEncoder(&buf).Encode(ev)
	return buf.Bytes(), err
}

// requireSameLine checks appendEvent against encoding/json: the same bytes when it
// writes ev, and only a fallback case (or a value encoding/json rejects) when it does not.
func requireSameLine(t *testing.T, ev *Event) {
	t.Helper()
	want, werr := jsonLine(t, ev)
	prefix := []byte("keep")
	got, ok := appendEvent(prefix, ev)
	if !ok {
		require.Equal(t, "keep", string(got), "dst unchanged on fallback")
		needs := len(ev.Params) > 0 || len(ev.ServerDebug) > 0 || len(ev.Metrics) > 0 || len(ev.GPUs) > 0 ||
			ev.Provenance != nil || ev.Shard != nil || len(ev.Models) > 0
		require.True(t, needs || werr != nil, "appendEvent left to encoding/json an event it encodes: %s", want)
		return
	}
	require.NoError(t, werr, "appendEvent wrote an event encoding/json rejects: %s", got)
	require.Equal(t, string(want), string(got[len(prefix):]))
}

var (
	sampleTime = time.Date(2026, 12, 3, 11, 30, 0, 123456789, time.UTC)
	sched      = sampleTime.Add(-1500 * time.Microsecond)
)

func TestAppendEventEveryType(t *testing.T) {
	// Every event type with the fields its writers set (see EventType's comments and
	// harness/workload/events.go), plus escaping-heavy strings.
	types := []EventType{EventRunStart, EventRunEnd, EventScheduled, EventSent, EventHeaders,
		EventFirstToken, EventDone, EventFaultStart, EventFaultStop, EventFaultVerified, EventSample,
		EventDrain, EventLeakCheck, EventSelfCheck, EventLog, EventNote, EventTarget, EventTargetDown,
		EventTargetUp, EventPDCounter, EventHealth}
	full := Event{Time: time.Now(), // a monotonic reading: MarshalJSON drops it
		RequestID: "ol-00000042", Workload: "chat<&>", Session: 3, Turn: 2, Endpoint: "chat", Scheduled: &sched,
		PromptTokens: 120, PromptBytes: 512, Outcome: OutcomeStalled, Cause: CauseFaultPrefix + "kill",
		Phase: PhaseMidStream, Status: 200, Error: "read: \"reset\"\n\tby peer \x01\x7f",
		TTFT: 0.0123456789, E2E: 1.5, ITL: []float64{0.001, 1e-7, 0, math.Copysign(0, -1), 3, 1e21, 123.456},
		Age: 31.000001, CompletionTokens: 64, Chunks: 65, Bytes: 1 << 40, FinishReason: "length",
		Probe: "capital", Text: "Paris \u2028\u2029 \xff\xfe é 日本", ConnRetry: 1,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Lag: -2.5e-8, Fault: "kill-decode", FaultType: "process_kill",
		Target: "decode", Passed: Bool(false), Detail: "a&b", Started: &sampleTime, Part: 2, Source: "router",
		InFlight: 7, LagP99: 0.098, LagMax: 0.75, Scenario: "smoke", Seed: -9, URL: "http://127.0.0.1:8080/x?a=1&b=<2>",
		Interrupted: "signal: interrupt", Mode: ModeSim, ServerVersion: "v1.2.3", Message: "hello\\world"}
	for _, typ := range types {
		t.Run(string(typ), func(t *testing.T) {
			requireSameLine(t, &Event{Time: sampleTime, Type: typ})
			ev := full
			ev.Type = typ
			requireSameLine(t, &ev)
		})
	}
	t.Run("zero", func(t *testing.T) { requireSameLine(t, &Event{}) })
	t.Run("zone", func(t *testing.T) {
		requireSameLine(t, &Event{Time: sampleTime.In(time.FixedZone("x", -(5*3600 + 30*60 + 7))), Type: EventLog})
		requireSameLine(t, &Event{Time: sampleTime.In(time.FixedZone("x", 24*3600)), Type: EventLog}) // json rejects
		requireSameLine(t, &Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Type: EventLog})
		requireSameLine(t, &Event{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), Type: EventLog})
	})
	t.Run("passed_true", func(t *testing.T) { requireSameLine(t, &Event{Type: EventDrain, Passed: Bool(true)}) })
	t.Run("nan", func(t *testing.T) {
		requireSameLine(t, &Event{Type: EventDone, TTFT: math.NaN()})
		requireSameLine(t, &Event{Type: EventDone, ITL: []float64{1, math.Inf(-1)}})
	})
}

func TestAppendEventFallsBackForNestedFields(t *testing.T) {
	for name, ev := range map[string]Event{
		"params":       {Type: EventFaultStart, Params: map[string]any{"delay": "1s"}},
		"server_debug": {Type: EventDone, ServerDebug: json.RawMessage(`{"state": "decode"}`)},
		"metrics":      {Type: EventSample, Metrics: map[string]float64{"b": 1, "a": 2}},
		"gpus":         {Type: EventSample, GPUs: []GPU{{Index: 0, Name: "H200"}}},
		"provenance":   {Type: EventRunStart, Provenance: &Provenance{Host: "h"}},
		"shard":        {Type: EventRunStart, Shard: &Shard{Index: 1, Count: 2}},
		"models":       {Type: EventTarget, Models: json.RawMessage(`{"data":[]}`)},
	} {
		t.Run(name, func(t *testing.T) {
			_, ok := appendEvent(nil, &ev)
			assert.False(t, ok)
			requireSameLine(t, &ev)
		})
	}
}

// FuzzAppendEvent compares appendEvent with encoding/json on arbitrary strings,
// numbers, times and zones.
func FuzzAppendEvent(f *testing.F) {
	f.Add("ol-1", "chat", "<a&b>\"\\\n\x00", int64(1764761400), int64(123456789), 0, 3, 0.0123, 1e-7, 0.0, []byte{}, true, true)
	f.Add("\xff\u2028", "", "é\t\r\b\f", int64(-62135596800), int64(0), 3600*5+7, -1, 1e21, 123456789.5, math.Copysign(0, -1),
		[]byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8}, false, true)
	f.Add("x", "y", "z", int64(253402300799), int64(999999999), -86399, 1<<40, 1e15, 999999999999999.9, 5e-324, []byte{1}, true, false)
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, sec, nsec int64, off int, n int, f1, f2, f3 float64, itl []byte, sch, passed bool) {
		at := time.Unix(sec, nsec).In(time.FixedZone("z", off%(30*3600)))
		ev := Event{Time: at, Type: EventType(s3), RequestID: s1, Workload: s2, Session: n, Turn: -n,
			Endpoint: s3, Outcome: Outcome(s1), Cause: s2, Error: s3, TTFT: f1, E2E: f2, Age: f3, Lag: -f1,
			Bytes: int64(n) << 20, Text: s1 + s2, Detail: s2, Seed: sec, Message: s3 + s1, LagP99: f2, LagMax: f3}
		for len(itl) >= 8 {
			ev.ITL = append(ev.ITL, math.Float64frombits(binary.LittleEndian.Uint64(itl)))
			itl = itl[8:]
		}
		if sch {
			ev.Scheduled = &at
		}
		if passed {
			ev.Passed = Bool(n%2 == 0)
		}
		requireSameLine(t, &ev)
	})
}

// requestEvents are the five events of one streamed request, as the harness writes them.
func requestEvents() []Event {
	s := sched
	return []Event{
		{Time: sched, Type: EventScheduled, RequestID: "ol-00012345", Workload: "ol", Endpoint: "chat", PromptBytes: 180, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{Time: sampleTime, Type: EventSent, RequestID: "ol-00012345", Workload: "ol", Scheduled: &s, Lag: 0.0015},
		{Time: sampleTime, Type: EventHeaders, RequestID: "ol-00012345", Workload: "ol", Status: 200},
		{Time: sampleTime, Type: EventFirstToken, RequestID: "ol-00012345", Workload: "ol", TTFT: 0.0021534},
		{Time: sampleTime, Type: EventDone, RequestID: "ol-00012345", Workload: "ol", Endpoint: "chat", Scheduled: &s,
			Outcome: OutcomeOK, Status: 200, TTFT: 0.0021534, E2E: 0.0031001, ITL: []float64{0.000412, 0.000533},
			PromptTokens: 12, PromptBytes: 180, CompletionTokens: 2, Chunks: 3, Bytes: 612, FinishReason: "length",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
	}
}

// BenchmarkEncodeRequestEvents encodes one request's five events: encoding/json's
// pooled encoder (the writer before appendEvent) against appendEvent, in the same run.
func BenchmarkEncodeRequestEvents(b *testing.B) {
	evs := requestEvents()
	b.Run("json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		b.ReportAllocs()
		for b.Loop() {
			for i := range evs {
				buf.Reset()
				if err := enc.Encode(&evs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var line []byte
		b.ReportAllocs()
		for b.Loop() {
			for i := range evs {
				var ok bool
				if line, ok = appendEvent(line[:0], &evs[i]); !ok {
					b.Fatal("fallback")
				}
			}
		}
	})
}

// BenchmarkWriterEmitRequestEvents is Writer.Emit of one request's five events into a
// real file, from parallel goroutines (the harness's workers): encoding/json for every
// line (the writer before appendEvent) against appendEvent, in the same run.
func BenchmarkWriterEmitRequestEvents(b *testing.B) {
	evs := requestEvents()
	for _, viaJSON := range []bool{true, false} {
		name := "append"
		if viaJSON {
			name = "json"
		}
		b.Run(name, func(b *testing.B) {
			w, err := Create(b.TempDir()+"/"+EventsFile, nil)
			require.NoError(b, err)
			w.viaJSON = viaJSON
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					for _, ev := range evs {
						w.Emit(ev)
					}
				}
			})
			require.NoError(b, w.Close())
		})
	}
}

// TestEmitRequestEventsAllocatesNothing: a request's five events cost the writer no
// allocation (the event stays on the stack, the line goes into a pooled buffer).
func TestEmitRequestEventsAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	evs := requestEvents()
	w, err := Create(t.TempDir()+"/"+EventsFile, nil)
	require.NoError(t, err)
	defer w.Close()
	allocs := testing.AllocsPerRun(200, func() {
		for _, ev := range evs {
			w.Emit(ev)
		}
	})
	assert.Zero(t, allocs)
	w.viaJSON = true // the check can fail: encoding/json's path allocates
	assert.NotZero(t, testing.AllocsPerRun(20, func() { w.Emit(evs[4]) }))
}

// FuzzAppendTime compares appendTime with time.Time.MarshalJSON, in the order a ledger
// sees times (two of them, a second apart or far apart, in one zone), including times
// MarshalJSON rejects, so the table of formatted seconds is hit, missed and refilled.
func FuzzAppendTime(f *testing.F) {
	f.Add(int64(1764761400), int64(123456789), 0, int64(0))
	f.Add(int64(1764761400), int64(0), 3600, int64(1))
	f.Add(int64(1764761400), int64(100), -5*3600-30*60, int64(-16))
	f.Add(int64(-62135596800), int64(0), 0, int64(-1))
	f.Add(int64(253402300799), int64(999999999), 0, int64(1))
	f.Add(int64(0), int64(10), 24*3600, int64(0))
	f.Add(int64(1764761400), int64(5), 23*3600+59*60, int64(7))
	f.Fuzz(func(t *testing.T, sec, nsec int64, off int, step int64) {
		zone := time.FixedZone("z", off%(30*3600))
		for _, at := range []time.Time{time.Unix(sec, nsec).In(zone), time.Unix(sec+step, nsec/3).In(zone),
			time.Unix(sec, nsec).UTC(), time.Unix(sec, nsec).In(zone)} {
			want, werr := at.MarshalJSON()
			got, ok := appendTime(nil, at)
			require.Equal(t, werr == nil, ok, "%v: ok", at)
			if ok {
				require.Equal(t, string(want), string(got), "%v", at)
			}
		}
	})
}

func TestAppendTimeLocal(t *testing.T) {
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(time.Nanosecond), now.Add(time.Second), now.Truncate(time.Second), now.UTC(), now.Round(0)} {
		want, err := at.MarshalJSON()
		require.NoError(t, err)
		got, ok := appendTime(nil, at)
		require.True(t, ok)
		require.Equal(t, string(want), string(got))
	}
}
