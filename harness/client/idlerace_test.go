package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/http1"
	"pdsoak/ledger"
)

// The idle keep-alive race, made deterministic: the server reads the request on a
// connection it has kept alive, then closes (or resets) it without answering, as a
// server whose idle timer fired just as the request arrived.
func TestIdleRace(t *testing.T) {
	ok := withLength(jsonHead, wBody)
	tests := []struct {
		name    string
		answer  func(n int) (string, rawAfter)
		want    ledger.Outcome
		retries int
		conns   int // connections the server saw
	}{
		{name: "reused, closed before any byte: retried once, ok", want: ledger.OutcomeOK, retries: 1, conns: 2,
			answer: func(n int) (string, rawAfter) {
				if n == 2 {
					return "", closeConn
				}
				return ok, keepOpen
			}},
		{name: "reused, reset before any byte: retried once, ok", want: ledger.OutcomeOK, retries: 1, conns: 2,
			answer: func(n int) (string, rawAfter) {
				if n == 2 {
					return "", resetConn
				}
				return ok, keepOpen
			}},
		{name: "reused, closed after a response byte: the request's error", want: ledger.OutcomeTransportError, conns: 1,
			answer: func(n int) (string, rawAfter) {
				if n == 2 {
					return "HTTP/1.1 2", closeConn
				}
				return ok, keepOpen
			}},
		{name: "reused, closed mid-body: connection_lost, not retried", want: ledger.OutcomeConnectionLost, conns: 1,
			answer: func(n int) (string, rawAfter) {
				if n == 2 {
					return jsonHead + "Content-Length: 500\r\n\r\n{", closeConn
				}
				return ok, keepOpen
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var conns atomic.Int32
			srv := newRawServer(t, false, func(n int) (string, rawAfter) {
				if n == 1 {
					conns.Add(1)
				}
				return tt.answer(n)
			})
			c, err := New(srv.url)
			require.NoError(t, err)
			defer c.CloseIdleConnections()
			do := func() *Result {
				return c.Do(context.Background(), &Request{ID: "r", Model: "ref", Messages: []Message{{Role: "user", Content: "hi"}}, Deadlines: dl}, nil)
			}
			first := do()
			require.Equal(t, ledger.OutcomeOK, first.Outcome, first.Err)
			require.Zero(t, first.ConnRetry)
			res := do()
			require.Equal(t, tt.want, res.Outcome, res.Err)
			assert.Equal(t, tt.retries, res.ConnRetry, "retries recorded on the result")
			assert.Equal(t, tt.conns, int(conns.Load()), "connections the server saw")
		})
	}
	t.Run("a fresh connection closed before any byte is not retried", func(t *testing.T) {
		srv := newRawServer(t, false, func(int) (string, rawAfter) { return "", closeConn })
		c, err := New(srv.url)
		require.NoError(t, err)
		defer c.CloseIdleConnections()
		res := c.Do(context.Background(), &Request{ID: "r", Model: "ref", Deadlines: dl}, nil)
		assert.Equal(t, ledger.OutcomeTransportError, res.Outcome)
		assert.Zero(t, res.ConnRetry)
		assert.Equal(t, 1, srv.requests(), "sent once")
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A pooled connection idle longer than the idle timeout is closed, not reused: with an
// idle timeout below the server's, the race does not happen at all.
func TestIdleTimeoutClosesPooledConnections(t *testing.T) {
	var conns atomic.Int32
	srv := newRawServer(t, false, func(n int) (string, rawAfter) {
		if n == 1 {
			conns.Add(1)
		}
		return withLength(jsonHead, wBody), keepOpen
	})
	now := time.Unix(1000, 0)
	c, err := New(srv.url, WithIdleTimeout(time.Second))
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	c.h1.pool = newTestPool(time.Second, func() time.Time { return now })
	for i, gap := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond} {
		now = now.Add(gap)
		res := c.Do(context.Background(), &Request{ID: "r", Model: "ref", Deadlines: dl}, nil)
		require.Equal(t, ledger.OutcomeOK, res.Outcome, "request %d: %s", i, res.Err)
	}
	assert.Equal(t, int32(2), conns.Load(), "reused after 0.5 s idle, a new connection after 1.5 s")
}

// sweepServer answers whole completions and closes connections idle for idle (Go's
// http.Server, as uvicorn does after its keep-alive timeout).
func sweepServer(t testing.TB, idle time.Duration) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, wBody)
	}))
	srv.Config.IdleTimeout = idle
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// sweep sends workers × n requests per think time, each worker waiting think between its
// requests, and returns the requests that failed and the retries recorded.
func sweep(send func() (failed bool, retries int), think time.Duration, workers, n int) (failed, retries int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range n {
				time.Sleep(think)
				f, r := send()
				mu.Lock()
				failed += boolInt(f)
				retries += r
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed, retries
}

// TestIdleRaceSweep sends requests with think times around a server's 300 ms idle
// timeout, so reused connections race with the server closing them. This client, with
// its idle timeout above the server's (so the race is survived, not avoided), reports
// no false error: every race is retried once on a fresh connection and recorded.
// net/http on the same sweep is only logged (its count depends on the machine). With
// PDSOAK_IDLE_SWEEP=N it sends N requests per think time and prints the docs' table.
func TestIdleRaceSweep(t *testing.T) {
	perThink, workers := 24, 4
	if v, err := strconv.Atoi(os.Getenv("PDSOAK_IDLE_SWEEP")); err == nil && v > 0 {
		perThink, workers = v, 8
	}
	const idle = 300 * time.Millisecond
	srv := sweepServer(t, idle)
	c, err := New(srv.URL, WithIdleTimeout(time.Minute))
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	ours := func() (bool, int) {
		res := c.Do(context.Background(), &Request{ID: "s", Model: "ref", Deadlines: dl}, nil)
		return res.Outcome != ledger.OutcomeOK, res.ConnRetry
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	theirs := func() (bool, int) {
		resp, err := hc.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{"model":"ref"}`)))
		if err != nil {
			return true, 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK, 0
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| think time | requests | pdsoak errors | pdsoak conn_retry | net/http errors |\n|---|---|---|---|---|\n")
	total := 0
	for _, think := range []time.Duration{250, 275, 290, 300, 310, 325, 350, 400} {
		think *= time.Millisecond
		if perThink < 100 && think != 300*time.Millisecond {
			continue // the short run keeps to where the race happens most
		}
		f, r := sweep(ours, think, workers, perThink/workers)
		nf, _ := sweep(theirs, think, workers, perThink/workers)
		total += f
		fmt.Fprintf(&table, "| %v | %d | %d | %d | %d |\n", think, perThink/workers*workers, f, r, nf)
	}
	t.Logf("idle race sweep against a %v server idle timeout:\n%s", idle, table.String())
	assert.Zero(t, total, "false errors from this client")
}

// newTestPool is the client's pool with an injected clock.
func newTestPool(idle time.Duration, now func() time.Time) *http1.Pool {
	return http1.NewPool(http1.WithIdleTimeout(idle), http1.WithClock(now))
}
