package launcher

import (
	"bytes"
	"cmp"
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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// colocated starts `pdserver colocated` with args on a free port and returns its URL and
// process id.
func colocated(b *testing.B, exe string, args ...string) (string, int) {
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
				return url, cmd.Process.Pid
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
		HealthTimeout: 60 * time.Second, Logger: quiet, Env: benchEnv()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { topo.Stop(context.Background()) })
	return topo
}

// benchEnv is PDSOAK_BENCH_ENV split on spaces (e.g. "GOMAXPROCS=1 GOGC=400"): added
// to the environment of every server process a benchmark starts, colocated included,
// to compare runtime settings without rebuilding. Not a figure: a tool.
func benchEnv() []string { return strings.Fields(os.Getenv("PDSOAK_BENCH_ENV")) }

// keepAlive is a pooled client for benchmarks (the tests' client closes connections).
var keepAlive = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}

// smallBody is the JSON body of a small request, encoded once per size.
func smallBody(maxTokens int) []byte {
	if b, ok := smallBodies.Load(maxTokens); ok {
		return b.([]byte)
	}
	b, _ := json.Marshal(map[string]any{"model": "ref", "prompt": "hi", "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true})
	smallBodies.Store(maxTokens, b)
	return b
}

var smallBodies sync.Map

func small(url string, maxTokens int) error {
	body := smallBody(maxTokens)
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
// through the PD router and against a colocated server started in the same run, after a
// short warm-up; reports p50 and p99 of each and the router's added latency.
func BenchmarkRouterLatency(b *testing.B) {
	exe, err := pdserverPath()
	if err != nil {
		b.Fatalf("build pdserver: %v", err)
	}
	topo := benchTopology(b, exe, "--backend", "tinyref")
	colo, coloPID := colocated(b, exe, "--backend", "tinyref")
	// 1,000 samples per target: a p99 over a few hundred is one or two stragglers.
	const n, warm = 1000, 20
	for i := 0; i < warm; i++ { // connections, pools, first-use allocations
		for _, u := range []string{topo.RouterURL, colo} {
			if err := small(u, 1); err != nil {
				b.Fatal("warm-up: ", err)
			}
		}
	}
	var pd, co []time.Duration
	pids := topologyPIDs(topo)
	pids["colo"] = coloPID
	meter := newCostMeter(pids)
	urls := map[string]string{"colo": colo}
	for _, p := range topo.Processes() {
		urls[strings.SplitN(p.Name, "-", 2)[0]] = p.URL
	}
	meter.countGC(urls)
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
	b.StopTimer()
	// Per request of each target: CPU time and context switches, which the machine's
	// load moves far less than the latencies.
	meter.report(b, len(pd))
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p50, p99, c50, c99 := pct(pd, .5), pct(pd, .99), pct(co, .5), pct(co, .99)
	b.ReportMetric(ms(p50), "pd_p50_ms")
	b.ReportMetric(ms(p99), "pd_p99_ms")
	b.ReportMetric(ms(c50), "colo_p50_ms")
	b.ReportMetric(ms(c99), "colo_p99_ms")
	b.ReportMetric(ms(p50-c50), "added_p50_ms")
	b.ReportMetric(ms(p99-c99), "added_p99_ms")
	profileTopology(b, "latency", topo, func() error { return small(topo.RouterURL, 1) })
	straceProcesses(b, pids, 200, func() error {
		if err := small(topo.RouterURL, 1); err != nil {
			return err
		}
		return small(colo, 1)
	})
}

// loadRun sends streams concurrent closed-loop streams of perStream small requests of
// maxTokens tokens each to url and returns the rate.
func loadRun(url string, streams, perStream, maxTokens int) (float64, error) {
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Pointer[error] // the first failure (errors of any type)
	start := time.Now()
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := getStreamClient(url, maxTokens)
			if err != nil {
				failed.Add(int64(perStream))
				firstErr.CompareAndSwap(nil, &err)
				return
			}
			defer putStreamClient(url, maxTokens, c)
			for i := 0; i < perStream; i++ {
				if err := c.do(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d requests failed: %v", failed.Load(), *firstErr.Load())
	}
	return float64(streams*perStream) / time.Since(start).Seconds(), nil
}

// pidCPU is the user+system CPU time process pid has used so far (Linux; 0 elsewhere).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis; utime and stime are the 12th and
	// 13th of them, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// profileTopology, when PDSOAK_BENCH_PROFILE names a directory, keeps running load
// against the topology while it takes a CPU profile (PDSOAK_BENCH_PROFILE_SECONDS, default
// 5) of every process of topo and writes DIR/NAME-PROCESS.profile. PDSOAK_BENCH_PROFILE_KINDS
// lists other /debug/pprof/ endpoints to take over the same seconds (profile,allocs,trace).
// Not a figure: a tool for finding where the time goes (go tool pprof -top DIR/...).
func profileTopology(b *testing.B, name string, topo *Topology, load func() error) {
	dir := os.Getenv("PDSOAK_BENCH_PROFILE")
	if dir == "" {
		return
	}
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("PDSOAK_BENCH_PROFILE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	kinds := strings.Split(cmp.Or(os.Getenv("PDSOAK_BENCH_PROFILE_KINDS"), "profile"), ",")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, p := range topo.Processes() {
		for _, kind := range kinds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", p.URL, kind, secs))
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				f, err := os.Create(fmt.Sprintf("%s/%s-%s.%s", dir, name, p.Name, kind))
				if err != nil {
					b.Error(err)
					return
				}
				defer f.Close()
				io.Copy(f, resp.Body)
			}()
		}
	}
	go func() { wg.Wait(); close(stop) }()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := load(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouterThroughput: 256 concurrent streams of small simtime requests through the
// PD router, against a colocated simtime server in the same run; reports both rates and
// their ratio.
func BenchmarkRouterThroughput(b *testing.B) {
	benchThroughput(b, "throughput", nil, 4, "pd_req/s", "colo_req/s", "pd/colo")
}

// BenchmarkRouterZeroTime: the software's own ceiling. The same load as
// BenchmarkRouterThroughput on the zero simtime profile (every step takes no modelled
// time), so the rate is bounded by the router, the workers, the KV transfer and the
// client alone.
func BenchmarkRouterZeroTime(b *testing.B) {
	benchThroughput(b, "zero", []string{"--sim-profile", "zero"}, 16, "pd_zero_req/s", "colo_zero_req/s", "pd_zero/colo_zero")
}

func benchThroughput(b *testing.B, name string, extra []string, perStream int, pdMetric, coMetric, ratioMetric string) {
	exe, err := pdserverPath()
	if err != nil {
		b.Fatalf("build pdserver: %v", err)
	}
	args := append([]string{"--backend", "simtime", "--max-running-requests", "256", "--max-queued-requests", "4096"}, extra...)
	topo := benchTopology(b, exe, args...)
	colo, coloPID := colocated(b, exe, args...)
	const streams, maxTokens = 256, 8
	// Warm both up: connections, pools, first-use allocations.
	for _, u := range []string{topo.RouterURL, colo} {
		if _, err := loadRun(u, streams, 1, maxTokens); err != nil {
			b.Fatal("warm-up: ", err)
		}
	}
	var pdRate, coRate float64
	pids := topologyPIDs(topo)
	pids["client"] = os.Getpid() // the load generator itself
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		// CPU time and context switches per request of each process (first iteration):
		// steadier than rates on a shared machine.
		meter := newCostMeter(pids)
		p, err := loadRun(topo.RouterURL, streams, perStream, maxTokens)
		if err != nil {
			b.Fatal("router: ", err)
		}
		if it == 0 {
			meter.report(b, streams*perStream)
		}
		coMeter := newCostMeter(map[string]int{"colo": coloPID})
		c, err := loadRun(colo, streams, perStream, maxTokens)
		if err != nil {
			b.Fatal("colocated: ", err)
		}
		if it == 0 {
			coMeter.report(b, streams*perStream)
		}
		pdRate += p
		coRate += c
	}
	b.StopTimer()
	b.ReportMetric(pdRate/float64(b.N), pdMetric)
	b.ReportMetric(coRate/float64(b.N), coMetric)
	b.ReportMetric(pdRate/coRate, ratioMetric)
	profileTopology(b, name, topo, func() error {
		_, err := loadRun(topo.RouterURL, streams, perStream, maxTokens)
		return err
	})
}
