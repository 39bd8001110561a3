package telemetry

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// decodeWriteRequest is an independent reader of the 1.0 message (field by field with
// protowire), so the encoder is not checked against itself.
func decodeWriteRequest(t *testing.T, b []byte) []timeSeries {
	t.Helper()
	var out []timeSeries
	fields := func(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, fixed uint64)) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			require.GreaterOrEqual(t, n, 0, "tag")
			b = b[n:]
			switch typ {
			case protowire.BytesType:
				v, n := protowire.ConsumeBytes(b)
				require.GreaterOrEqual(t, n, 0, "bytes")
				fn(num, typ, v, 0)
				b = b[n:]
			case protowire.Fixed64Type:
				v, n := protowire.ConsumeFixed64(b)
				require.GreaterOrEqual(t, n, 0, "fixed64")
				fn(num, typ, nil, v)
				b = b[n:]
			case protowire.VarintType:
				v, n := protowire.ConsumeVarint(b)
				require.GreaterOrEqual(t, n, 0, "varint")
				fn(num, typ, nil, v)
				b = b[n:]
			default:
				t.Fatalf("unexpected wire type %v", typ)
			}
		}
	}
	fields(b, func(num protowire.Number, _ protowire.Type, tsb []byte, _ uint64) {
		require.Equal(t, protowire.Number(1), num, "WriteRequest.timeseries")
		var ts timeSeries
		samples := 0
		fields(tsb, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
			switch num {
			case 1:
				var l label
				fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) {
					if num == 1 {
						l.name = string(v)
					} else {
						l.value = string(v)
					}
				})
				ts.labels = append(ts.labels, l)
			case 2:
				samples++
				fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, x uint64) {
					if num == 1 {
						ts.value = math.Float64frombits(x)
					} else {
						ts.ts = int64(x)
					}
				})
			}
		})
		require.Equal(t, 1, samples)
		out = append(out, ts)
	})
	return out
}

// receiver is a remote-write 1.0 endpoint on loopback that keeps what it was sent.
type receiver struct {
	mu      sync.Mutex
	pushes  [][]timeSeries
	headers []http.Header
	fail    int // answer 500 to this many requests first
}

func (rc *receiver) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.fail > 0 {
			rc.fail--
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		raw, err := snappy.Decode(nil, body)
		if !assert.NoError(t, err, "snappy block encoding") {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.pushes = append(rc.pushes, decodeWriteRequest(t, raw))
		rc.headers = append(rc.headers, r.Header.Clone())
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (ts timeSeries) get(name string) string {
	for _, l := range ts.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

func TestPusherSendsRemoteWrite1(t *testing.T) {
	rc := &receiver{fail: 1}
	srv := rc.start(t)
	m := NewMetrics(Labels{Scenario: "s", Seed: 7}, false)
	feed(m)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p, err := NewPusher(srv.URL+"/api/v1/write", m.Gatherer(), WithPushClock(func() time.Time { return at }),
		WithPushLabels(map[string]string{"instance": "h1"}))
	require.NoError(t, err)
	require.NoError(t, p.Push(context.Background()), "a 500 is retried")
	require.Len(t, rc.pushes, 1)
	h := rc.headers[0]
	assert.Equal(t, "snappy", h.Get("Content-Encoding"))
	assert.Equal(t, "application/x-protobuf", h.Get("Content-Type"))
	assert.Equal(t, "0.1.0", h.Get("X-Prometheus-Remote-Write-Version"))

	byKey := map[string]float64{}
	for _, ts := range rc.pushes[0] {
		names := make([]string, len(ts.labels))
		for i, l := range ts.labels {
			names[i] = l.name
		}
		assert.IsIncreasing(t, names, "labels sorted by name")
		assert.Equal(t, at.UnixMilli(), ts.ts)
		assert.Equal(t, "h1", ts.get("instance"))
		key := ts.get("__name__") + "/" + ts.get("outcome") + ts.get("le")
		byKey[key] += ts.value
	}
	assert.Equal(t, 1.0, byKey[SeriesRequests+"/ok"])
	assert.Equal(t, 1.0, byKey[SeriesRequests+"/stalled"])
	assert.Equal(t, 3.0, byKey[SeriesE2E+"_count/"])
	assert.Equal(t, 3.0, byKey[SeriesE2E+"_bucket/+Inf"])
	assert.Equal(t, 3.0, byKey[SeriesE2E+"_bucket/1"], "every request took 1s or less (le=\"1\")")
	assert.Equal(t, 1.0, byKey[SeriesE2E+"_bucket/0.5"])
	assert.InDelta(t, 2.5, byKey[SeriesE2E+"_sum/"], 1e-9)
	assert.Equal(t, 1.0, byKey[SeriesRunInfo+"/"])
}

func TestPusherTicksAndPushesOnClose(t *testing.T) {
	rc := &receiver{}
	srv := rc.start(t)
	m := NewMetrics(Labels{Scenario: "s"}, false)
	p, err := NewPusher(srv.URL, m.Gatherer(), WithPushInterval(time.Millisecond))
	require.NoError(t, err)
	p.Start()
	// Wait (bounded by the test's timeout) for ticks, without asserting on time.
	for p.Pushes() < 2 {
		time.Sleep(time.Millisecond)
	}
	feed(m)
	require.NoError(t, p.Close(context.Background()))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	last := rc.pushes[len(rc.pushes)-1]
	total := 0.0
	for _, ts := range last {
		if ts.get("__name__") == SeriesRequests {
			total += ts.value
		}
	}
	assert.Equal(t, 3.0, total, "the final push has the last values")
}

func TestPusherErrors(t *testing.T) {
	m := NewMetrics(Labels{}, false)
	_, err := NewPusher("http://x", m.Gatherer(), WithPushInterval(0))
	require.ErrorContains(t, err, "interval")
	_, err = NewPusher("http://[::1", m.Gatherer())
	require.ErrorContains(t, err, "telemetry: remote write URL")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "out of order sample", http.StatusBadRequest)
	}))
	defer srv.Close()
	p, err := NewPusher(srv.URL, m.Gatherer())
	require.NoError(t, err)
	err = p.Push(context.Background())
	require.ErrorContains(t, err, "telemetry: remote write")
	assert.ErrorContains(t, err, "out of order sample", "a 4xx is not retried and says why")
	assert.Equal(t, 0, p.Pushes())
}

func TestWriteRequestMarshalToSizedBuffer(t *testing.T) {
	w := &writeRequest{series: []timeSeries{{labels: []label{{"__name__", "x"}}, value: 1.5, ts: 42}}}
	buf := make([]byte, w.Size())
	n, err := w.MarshalToSizedBuffer(buf)
	require.NoError(t, err)
	assert.Equal(t, len(buf), n)
	got := decodeWriteRequest(t, buf)
	assert.Equal(t, w.series, got)
	_, err = w.MarshalToSizedBuffer(make([]byte, 1))
	assert.Error(t, err)
	assert.Equal(t, 0, (&writeRequest{}).Size())
}

// Remote write 1.0 says a label set "MUST NOT contain any empty label names or values",
// and receivers act on it (Thanos Receive drops such a series and answers the push with
// an error). A scrape drops an empty-valued label; a push must too: an ok request's
// cause is "" and a run without --label has run_info{label=""}.
func TestPusherSendsNoEmptyLabelValues(t *testing.T) {
	rc := &receiver{}
	srv := rc.start(t)
	m := NewMetrics(Labels{Scenario: "s", Seed: 7}, false) // no Label: run_info's label is ""
	feed(m)
	p, err := NewPusher(srv.URL, m.Gatherer())
	require.NoError(t, err)
	require.NoError(t, p.Push(context.Background()))
	require.Len(t, rc.pushes, 1)
	okSeen, infoSeen := false, false
	for _, ts := range rc.pushes[0] {
		for _, l := range ts.labels {
			assert.NotEmpty(t, l.name, "%v", ts.labels)
			assert.NotEmpty(t, l.value, "label %q of %v", l.name, ts.labels)
		}
		switch ts.get("__name__") {
		case SeriesRequests:
			if ts.get("outcome") == "ok" {
				okSeen = true
				assert.Equal(t, 1.0, ts.value)
			}
		case SeriesRunInfo:
			infoSeen = true
			assert.Equal(t, "7", ts.get("seed"))
		}
	}
	assert.True(t, okSeen, "the ok requests' series is still sent, without its empty cause")
	assert.True(t, infoSeen, "run_info is still sent, without its empty label")
}

// A run that ends while a periodic push hangs on a collector that does not answer: Close
// is bounded by its ctx (the CLI gives it 15 s for the push and the span flush together),
// not by the hung push's own timeout, which here is an hour.
func TestPusherCloseDoesNotWaitOutAHungPush(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // never answers while the test runs
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handler returns, then the server closes
	p, err := NewPusher(srv.URL, NewMetrics(Labels{Scenario: "s"}, false).Gatherer(),
		WithPushInterval(time.Millisecond), WithPushTimeout(time.Hour))
	require.NoError(t, err)
	p.Start()
	<-arrived // a periodic push is in flight and will not be answered

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller's bound has passed
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	require.Eventually(t, func() bool {
		select {
		case err = <-closed:
			return true
		default:
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "Close waited for the hung periodic push instead of its ctx")
	require.ErrorContains(t, err, "telemetry: remote write", "the final push could not be made within ctx")
	assert.Equal(t, 0, p.Pushes())
}

// A collector that rate-limits (429 with a Retry-After longer than the push's bound): the
// push fails, and its error says the collector refused it, not only that time ran out.
func TestPusherRateLimitedSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "ingestion rate limit exceeded", http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	p, err := NewPusher(srv.URL, NewMetrics(Labels{Scenario: "s"}, false).Gatherer(), WithPushTimeout(200*time.Millisecond))
	require.NoError(t, err)
	err = p.Push(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, "429")
	assert.ErrorContains(t, err, "ingestion rate limit exceeded")
}

// A run's pushed series name their source (job, instance: this host and process by
// default), as a scrape's would: two runs of one scenario pushing at once write series of
// their own instead of overwriting one counter in turn.
func TestStartPushesJobAndInstance(t *testing.T) {
	for _, tc := range []struct{ instance, want string }{{"", DefaultInstance()}, {"ci-7", "ci-7"}} {
		rc := &receiver{}
		srv := rc.start(t)
		tel, err := Start(context.Background(), Config{RemoteWrite: srv.URL, RemoteWriteInterval: time.Hour,
			Instance: tc.instance, Labels: Labels{Scenario: "s"}})
		require.NoError(t, err)
		require.NoError(t, tel.Close(context.Background()))
		rc.mu.Lock()
		require.NotEmpty(t, rc.pushes, "the final push")
		for _, ts := range rc.pushes[len(rc.pushes)-1] {
			assert.Equal(t, PushJob, ts.get("job"), ts.get("__name__"))
			assert.Equal(t, tc.want, ts.get("instance"), ts.get("__name__"))
		}
		rc.mu.Unlock()
	}
	host, _ := os.Hostname()
	assert.Equal(t, host+":"+strconv.Itoa(os.Getpid()), DefaultInstance())
}
