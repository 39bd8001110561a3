package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// colocated starts `pdserver colocated` with args on a free port and returns its URL.
func colocated(b *testing.B, exe string, args ...string) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(exe, append([]string{"colocated", "--port", strconv.Itoa(port), "--log-level", "warn"}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		if resp, err := client.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
		if i > 600 {
			b.Fatal("colocated server never healthy")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func benchTopology(b *testing.B, exe string, args ...string) *Topology {
	b.Helper()
	topo, err := Start(context.Background(), Config{Command: []string{exe}, Prefill: 1, Decode: 1, LogDir: b.TempDir(),
		CommonArgs: append([]string{"--log-level", "warn"}, args...), RouterArgs: []string{"--log-level", "warn"},
		HealthTimeout: 60 * time.Second, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { topo.Stop(context.Background()) })
	return topo
}

// keepAlive is a pooled client for benchmarks (the tests' client closes connections).
var keepAlive = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}

func small(url string, maxTokens int) error {
	body, _ := json.Marshal(map[string]any{"model": "ref", "prompt": "hi", "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true})
	resp, err := keepAlive.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func pct(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// BenchmarkRouterLatency: small requests (1 token, tinyref) one at a time, alternately
// through the PD router and against a colocated server started in the same run; reports
// p50 and p99 of each and the router's added latency.
func BenchmarkRouterLatency(b *testing.B) {
	exe, err := pdserverPath()
	if err != nil {
		b.Fatalf("build pdserver: %v", err)
	}
	topo := benchTopology(b, exe, "--backend", "tinyref")
	colo := colocated(b, exe, "--backend", "tinyref")
	const n = 200
	var pd, co []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for i := 0; i < n; i++ {
			for _, target := range []struct {
				url string
				out *[]time.Duration
			}{{topo.RouterURL, &pd}, {colo, &co}} {
				start := time.Now()
				if err := small(target.url, 1); err != nil {
					b.Fatal(err)
				}
				*target.out = append(*target.out, time.Since(start))
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p50, p99, c50, c99 := pct(pd, .5), pct(pd, .99), pct(co, .5), pct(co, .99)
	b.ReportMetric(ms(p50), "pd_p50_ms")
	b.ReportMetric(ms(p99), "pd_p99_ms")
	b.ReportMetric(ms(c50), "colo_p50_ms")
	b.ReportMetric(ms(c99), "colo_p99_ms")
	b.ReportMetric(ms(p50-c50), "added_p50_ms")
	b.ReportMetric(ms(p99-c99), "added_p99_ms")
}

// BenchmarkRouterThroughput: 256 concurrent streams of small simtime requests through the
// PD router, against a colocated simtime server in the same run; reports both rates and
// their ratio.
func BenchmarkRouterThroughput(b *testing.B) {
	exe, err := pdserverPath()
	if err != nil {
		b.Fatalf("build pdserver: %v", err)
	}
	args := []string{"--backend", "simtime", "--max-running-requests", "256", "--max-queued-requests", "4096"}
	topo := benchTopology(b, exe, args...)
	colo := colocated(b, exe, args...)
	const streams, perStream = 256, 4
	run := func(url string) (float64, error) {
		var wg sync.WaitGroup
		var failed atomic.Int64
		var firstErr atomic.Value
		start := time.Now()
		for s := 0; s < streams; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perStream; i++ {
					if err := small(url, 8); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			return 0, fmt.Errorf("%d requests failed: %v", failed.Load(), firstErr.Load())
		}
		return float64(streams*perStream) / time.Since(start).Seconds(), nil
	}
	var pdRate, coRate float64
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		p, err := run(topo.RouterURL)
		if err != nil {
			b.Fatal("router: ", err)
		}
		c, err := run(colo)
		if err != nil {
			b.Fatal("colocated: ", err)
		}
		pdRate += p
		coRate += c
	}
	b.ReportMetric(pdRate/float64(b.N), "pd_req/s")
	b.ReportMetric(coRate/float64(b.N), "colo_req/s")
	b.ReportMetric(pdRate/coRate, "pd/colo")
}
