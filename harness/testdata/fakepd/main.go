// Command fakepd stands in for pdserver in the harness's embedded-topology tests: any
// role, --host/--port honoured, every other flag ignored. It answers the OpenAI chat
// and completions endpoints with a short stream, and serves /health, /metrics (a
// running gauge) and /debug/requests. Role "router" behaves the same.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	host, port := "127.0.0.1", "0"
	args := os.Args[1:]
	role := "colocated"
	if len(args) > 0 {
		role, args = args[0], args[1:]
	}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--host":
			host = args[i+1]
		case "--port":
			port = args[i+1]
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("fakepd", role, "listening on", ln.Addr())
	var mu sync.Mutex
	held := map[string]time.Time{}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(held)
		mu.Unlock()
		fmt.Fprintf(w, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{role=%q} %d\nsglang:num_decode_prealloc_queue_reqs 0\n", role, n)
	})
	mux.HandleFunc("/debug/requests", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		list := []map[string]any{}
		for id, t := range held {
			list = append(list, map[string]any{"id": id, "stage": role, "age_seconds": time.Since(t).Seconds()})
		}
		json.NewEncoder(w).Encode(map[string]any{"requests": list})
	})
	stream := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Request-ID")
		mu.Lock()
		held[id] = time.Now()
		mu.Unlock()
		defer func() { mu.Lock(); delete(held, id); mu.Unlock() }()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"},\"text\":\"\",\"finish_reason\":null}]}\n\n", i)
			fl.Flush()
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}
	mux.HandleFunc("/v1/chat/completions", stream)
	mux.HandleFunc("/v1/completions", stream)
	srv := &http.Server{Handler: mux}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; srv.Close() }()
	_ = srv.Serve(ln)
}
