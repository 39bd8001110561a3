package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKVLink(t *testing.T) {
	tests := []struct {
		in   string
		p, d int
		addr string
		ok   bool
	}{
		{"0:0=127.0.0.1:9000", 0, 0, "127.0.0.1:9000", true},
		{"2:13=[::1]:80", 2, 13, "[::1]:80", true},
		{"0:0", 0, 0, "", false},
		{"0=127.0.0.1:1", 0, 0, "", false},
		{"-1:0=127.0.0.1:1", 0, 0, "", false},
		{"0:0=127.0.0.1", 0, 0, "", false},
		{"0:0=127.0.0.1:0", 0, 0, "", false},
		{"a:b=h:1", 0, 0, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, d, addr, err := parseKVLink(tc.in)
			if (err == nil) != tc.ok || (tc.ok && (p != tc.p || d != tc.d || addr != tc.addr)) {
				t.Fatalf("got %d %d %q %v", p, d, addr, err)
			}
		})
	}
}

func FuzzParseKVLink(f *testing.F) {
	for _, s := range []string{"0:0=127.0.0.1:9000", "1:2=[::1]:1", "x", ":=:", "0:0=:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, d, addr, err := parseKVLink(s)
		if err != nil {
			return
		}
		if p < 0 || d < 0 || addr == "" || !strings.HasSuffix(s, "="+addr) {
			t.Fatalf("%q parsed as %d %d %q", s, p, d, addr)
		}
	})
}

func TestRouterFlagsEveryProblemAtOnce(t *testing.T) {
	f := &routerFlags{port: -1, prefill: []string{"http://a"}, prefillBoot: []string{"x", "y"},
		kvLinks: []string{"5:0=127.0.0.1:1"}, logLevel: "loud", logFormat: "xml"}
	_, _, _, err := f.workers()
	require.Error(t, err)
	for _, flag := range []string{"--port", "--decode", "--prefill-bootstrap", "--health-interval", "--kv-link", "--log-level", "--log-format"} {
		assert.Contains(t, err.Error(), flag)
	}
	assert.Contains(t, err.Error(), "--prefill-bootstrap is given 2 times for 1 prefill worker")
}

// TestRouterEqualsColocated runs the router command in process over real prefill and
// decode workers and checks greedy completions equal a colocated worker's, concurrently.
func TestRouterEqualsColocated(t *testing.T) {
	col := startWorker(t, roleColocated, "--seed", "5")
	pre := startWorker(t, rolePrefill, "--seed", "5")
	dec := startWorker(t, roleDecode, "--seed", "5")
	f := &routerFlags{host: "127.0.0.1", prefill: []string{pre.url}, decode: []string{dec.url},
		healthInterval: secondsValue(100 * time.Millisecond), healthTimeout: secondsValue(2 * time.Second),
		maxRetries: 1, seed: 1, abortUnhealthy: true, shutdownGrace: secondsValue(time.Second), logLevel: "warn", logFormat: "text"}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runRouter(ctx, f, io.Discard, ready) }()
	var url string
	select {
	case addr := <-ready:
		url = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("router: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router returned %v", err)
		}
	}()
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	text := func(base, prompt string) (string, error) {
		body := fmt.Sprintf(`{"model":"ref","prompt":%q,"max_tokens":12,"temperature":0,"ignore_eos":true}`, prompt)
		st, _, b, err := rawPost(t, rctx, base+"/v1/completions", body)
		if err != nil || st != 200 {
			return "", fmt.Errorf("status %d err %v body %s", st, err, b)
		}
		var out struct{ Choices []struct{ Text string } }
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
			return "", fmt.Errorf("body %s: %v", b, err)
		}
		return out.Choices[0].Text, nil
	}
	prompts := []string{"The river runs", "Nobody is in a hurry here.", strings.Repeat("goats ", 9), "a"}
	var wg sync.WaitGroup
	for _, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want, err := text(col.url, p)
			if err != nil {
				t.Errorf("colocated: %v", err)
				return
			}
			got, err := text(url, p)
			if err != nil {
				t.Errorf("router: %v", err)
				return
			}
			if got != want {
				t.Errorf("prompt %q: router %q, colocated %q", p, got, want)
			}
		}()
	}
	wg.Wait()
	if st, body := getText(t, url+"/debug/requests"); st != 200 || !strings.Contains(body, `"role":"router"`) {
		t.Fatalf("debug/requests %d %s", st, body)
	}
	if st, body := getText(t, url+"/metrics"); st != 200 || !strings.Contains(body, "pdsoak_router_requests_total 4") {
		t.Fatalf("metrics %d %s", st, body)
	}
}
