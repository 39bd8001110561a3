package api

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"pdsoak/internal/http1"
	"pdsoak/server/gen"
)

// BenchmarkStreamOverhead measures the cost of the handler per streamed request (128
// tokens, one per event) against a baseline handler that drains the same fake generator
// and writes minimal SSE events with no parsing, detokenizing or stop handling. The
// reported metric x_baseline is api time ÷ baseline time, measured in the same run.
func BenchmarkStreamOverhead(b *testing.B) {
	out := strings.Repeat("abcdefgh", 16)
	f := &fakeGen{script: textScript(out, "length")}
	apiSrv := httptest.NewServer(New(f, WithLogger(discardLogger()), WithContextLength(4096)))
	defer apiSrv.Close()
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		ch, _ := f.Generate(r.Context(), &gen.Request{Prompt: []int{256, 1}, MaxTokens: len(out)})
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for ev := range ch {
			bs, _ := json.Marshal(ev.Tokens)
			_, _ = w.Write(append(append([]byte("data: "), bs...), '\n', '\n'))
			_ = rc.Flush()
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}))
	defer base.Close()
	body := `{"prompt":"x","max_tokens":128,"temperature":0,"stream":true}`
	one := func(url string) time.Duration {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	var apiT, baseT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		baseT += one(base.URL)
		apiT += one(apiSrv.URL)
	}
	b.StopTimer()
	b.ReportMetric(float64(apiT)/float64(baseT), "x_baseline")
	b.ReportMetric(float64(apiT.Microseconds())/float64(b.N), "api_us/req")
	b.ReportMetric(float64(baseT.Microseconds())/float64(b.N), "baseline_us/req")
	http.DefaultClient.CloseIdleConnections()
	f.wg.Wait()
}

// BenchmarkLeanGenerate: POST /generate the way the router sends it (one keep-alive
// connection, one request at a time, a two-token answer), against the same handler
// behind net/http and behind the lean server, alternating blocks of 200 requests in one
// process. lean/nethttp_cpu is the ratio of process CPU time (user + system, client
// included: the same on both sides) per request; *_allocs/req counts every allocation
// of the process (client included) per request.
func BenchmarkLeanGenerate(b *testing.B) {
	type side struct {
		addr          string
		nc            net.Conn
		cpu, wall     time.Duration
		allocs, count uint64
	}
	var sides [2]*side
	for i, lean := range []bool{false, true} {
		f := &fakeGen{script: textScript("ok", "stop")}
		h := New(f, WithLogger(discardLogger()), WithContextLength(1024))
		var opts []ServerOption
		if lean {
			opts = append(opts, WithLeanGenerate())
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := NewServer(h, append(opts, WithServerLogger(discardLogger()))...)
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		defer func() { _ = srv.Shutdown(context.Background()); <-errc; f.wg.Wait() }()
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		sides[i] = &side{addr: ln.Addr().String(), nc: nc}
	}
	req := []byte(genReq("bench", okBody))
	one := func(s *side) {
		if _, err := s.nc.Write(req); err != nil {
			b.Fatal(err)
		}
		_, body, err := http1.ReadResponse(s.nc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, body); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range sides {
		for range 100 { // warm-up
			one(s)
		}
	}
	const block = 200
	var ms runtime.MemStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			cpu0 := processCPU()
			runtime.ReadMemStats(&ms)
			m0, t0 := ms.Mallocs, time.Now()
			for range block {
				one(s)
			}
			s.wall += time.Since(t0)
			s.cpu += processCPU() - cpu0
			runtime.ReadMemStats(&ms)
			s.allocs += ms.Mallocs - m0
			s.count += block
		}
	}
	b.StopTimer()
	net, lean := sides[0], sides[1]
	b.ReportMetric(float64(lean.cpu)/float64(net.cpu), "lean/nethttp_cpu")
	b.ReportMetric(float64(lean.wall)/float64(net.wall), "lean/nethttp_wall")
	b.ReportMetric(float64(net.cpu.Microseconds())/float64(net.count), "nethttp_cpu_us/req")
	b.ReportMetric(float64(lean.cpu.Microseconds())/float64(lean.count), "lean_cpu_us/req")
	b.ReportMetric(float64(net.allocs)/float64(net.count), "nethttp_allocs/req")
	b.ReportMetric(float64(lean.allocs)/float64(lean.count), "lean_allocs/req")
}

// processCPU is this process's user + system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
