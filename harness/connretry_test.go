package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// racingServer answers the first request of every connection with a complete stream and
// keeps the connection; it reads the second request and closes the connection without a
// byte: the idle keep-alive race, on every reuse.
func racingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	stream := `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}` + "\n\ndata: [DONE]\n\n"
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 1; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if n == 2 || req.Method != http.MethodPost {
						if req.Method != http.MethodPost {
							fmt.Fprint(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
						}
						return
					}
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(stream), stream)
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// TestConnRetryRecorded: requests that meet the idle race are re-sent once on a fresh
// connection, end ok, and their done events say so (conn_retry), so the retry is visible.
func TestConnRetryRecorded(t *testing.T) {
	url := racingServer(t)
	sc := testScenario(url, time.Minute, scenarios.Workload{Name: "agents", Type: "agents", Agents: 1, Turns: 4})
	sc.Target.MetricsURL = ""
	generousDeadlines(sc)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir}))
	retried := 0
	done := eventsOf(readLedger(t, dir), ledger.EventDone)
	require.Len(t, done, 4)
	for _, ev := range done {
		assert.Equal(t, ledger.OutcomeOK, ev.Outcome, "%s: %s", ev.RequestID, ev.Error)
		retried += ev.ConnRetry
	}
	assert.Equal(t, 3, retried, "every turn after the first reused a connection the server then closed")
}
