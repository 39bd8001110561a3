package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"pdsoak/harness/client"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// okSSE answers every request with a short complete stream.
func okSSE(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n"+
		"data: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// newBenchExecutor wires an executor with a real ledger, as Run does.
func newBenchExecutor(b *testing.B, url string, onEvent func(ledger.Event)) (*executor, func()) {
	b.Helper()
	led, err := ledger.Create(filepath.Join(b.TempDir(), "events.jsonl"), onEvent)
	if err != nil {
		b.Fatal(err)
	}
	tr := client.NewTransport(5 * time.Second)
	c, _ := client.New(url, client.WithTransport(tr))
	e := &executor{c: c, led: led, log: slog.New(slog.DiscardHandler), lag: newLagRecorder(DefaultSelfCheckTick), reqCtx: context.Background()}
	return e, func() { c.CloseIdleConnections(); led.Close() }
}

// hitsPacer sends n hits as fast as possible (vegeta's own pacers never stop by count).
type hitsPacer uint64

func (p hitsPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	return 0, hits >= uint64(p)
}
func (p hitsPacer) Rate(time.Duration) float64 { return 0 }

// BenchmarkOpenLoopMaxRate compares the harness's open-loop throughput (vegeta pacing
// through the classifying client, every event written to the ledger) with vegeta's own
// attack on the same local target, in the same run. Reported: both rates and their
// ratio (harness / vegeta; 1.0 means the harness costs nothing extra).
func BenchmarkOpenLoopMaxRate(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(okSSE))
	defer srv.Close()
	const n = 2000
	body, _, _ := client.Body(&client.Request{Model: "ref", Stream: true, MaxTokens: 2,
		Messages: []client.Message{{Role: "user", Content: strings.Repeat("x", 32)}}})
	var harnessRate, vegetaRate float64
	// Alternate the two, three rounds each, and keep each side's best: on a shared
	// machine the best round is the least disturbed one.
	for i := 0; i < b.N*3; i++ {
		// vegeta alone.
		atk := vegeta.NewAttacker(vegeta.Workers(64))
		tr := vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: srv.URL + "/v1/chat/completions", Body: body})
		start := time.Now()
		ok := 0
		for res := range atk.Attack(tr, hitsPacer(n), 0, "vegeta") {
			if res.Code == 200 {
				ok++
			}
		}
		vegetaRate = max(vegetaRate, float64(ok)/time.Since(start).Seconds())

		// The harness: an open_loop workload at a rate no machine can keep.
		e, done := newBenchExecutor(b, srv.URL, nil)
		sc := &scenarios.Scenario{Name: "bench", Seed: 1, Duration: scenarios.Duration(time.Second),
			Target: scenarios.Target{URL: srv.URL},
			Workloads: []scenarios.Workload{{Name: "ol", Type: "open_loop", Count: n, Stream: true,
				Pacer: &scenarios.Pacer{Type: "constant", Rate: 1e6}}}}
		sc.ApplyDefaults()
		sc.Workloads[0].Stream = true
		w, err := workload.New(sc, 0)
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		w.Run(context.Background(), start, e)
		el := time.Since(start)
		okH := e.outcomes()[ledger.OutcomeOK]
		done()
		harnessRate = max(harnessRate, float64(okH)/el.Seconds())
		if okH != n || ok != n {
			b.Fatalf("harness ok %d, vegeta ok %d, want %d each", okH, ok, n)
		}
	}
	b.ReportMetric(harnessRate, "harness_req/s")
	b.ReportMetric(vegetaRate, "vegeta_req/s")
	b.ReportMetric(harnessRate/vegetaRate, "ratio")
}

// holdServerEnv makes the test binary act as a server that holds every stream open
// after one token (used in a child process so its memory is not counted).
const holdServerEnv = "PDSOAK_HARNESS_HOLD_SERVER"

func init() {
	if os.Getenv(holdServerEnv) != "1" {
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(2)
	}
	fmt.Println(ln.Addr().String())
	go func() { io.Copy(io.Discard, os.Stdin); os.Exit(0) }() // parent gone: exit
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	os.Exit(0)
}

// BenchmarkMemoryPerInFlight holds 5,000 concurrent streams open against a server in a
// child process and reports the harness's heap + stack growth per in-flight request.
func BenchmarkMemoryPerInFlight(b *testing.B) {
	const streams = 5000
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdServerEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + strings.TrimSpace(addr)
	var perReq, heapPer, stackPer float64
	for i := 0; i < b.N; i++ {
		var first atomic.Int64
		all := make(chan struct{})
		e, done := newBenchExecutor(b, url, func(ev ledger.Event) {
			if ev.Type == ledger.EventFirstToken && first.Add(1) == streams {
				close(all)
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		e.reqCtx = ctx
		sc := &scenarios.Scenario{Name: "mem", Seed: 1, Duration: scenarios.Duration(time.Minute),
			Target:    scenarios.Target{URL: url},
			Deadlines: scenarios.Deadlines{Total: scenarios.Duration(2 * time.Minute)},
			Workloads: []scenarios.Workload{{Name: "b", Type: "burst", Count: streams, Stream: true}}}
		sc.ApplyDefaults()
		sc.Workloads[0].Stream = true
		sc.Deadlines = scenarios.Deadlines{Connect: scenarios.Duration(30 * time.Second), Total: scenarios.Duration(2 * time.Minute)}
		w, _ := workload.New(sc, 0)
		hb, sb := memInUse()
		finished := make(chan struct{})
		go func() { w.Run(context.Background(), time.Now(), e); close(finished) }()
		select {
		case <-all:
		case <-time.After(90 * time.Second):
			cancel()
			<-finished
			b.Fatalf("only %d of %d streams started", first.Load(), streams)
		}
		ha, sa := memInUse()
		perReq = float64(ha+sa-hb-sb) / streams
		heapPer, stackPer = float64(ha-hb)/streams, float64(sa-sb)/streams
		cancel()
		<-finished
		done()
	}
	b.ReportMetric(perReq, "bytes/in-flight-request")
	b.ReportMetric(heapPer, "heap-bytes/req")
	b.ReportMetric(stackPer, "stack-bytes/req")
}

// memInUse returns heap and stack bytes in use after a GC.
func memInUse() (heap, stack uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}
