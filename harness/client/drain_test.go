package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// TestDrainOfTailIsBounded: after [DONE] the client reads what is left of a stream's body
// for its drain grace, at most 256 KiB. A server that sends exactly that much more and then
// holds the connection open must not hold the request: the deadline timers are stopped by
// then, so the read that tells whether the body ended at the limit is bounded by the grace
// or by nothing.
func TestDrainOfTailIsBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	firstToken := make(chan struct{})
	over := make(chan struct{}) // the test is over: the server lets the connection go
	var wg sync.WaitGroup
	t.Cleanup(func() { close(over); ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		stream := chatChunk("hi", "") + chatChunk("", "stop") + "data: [DONE]\n\n"
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(stream), stream); err != nil {
			return
		}
		// The tail comes once the client is past the stream's bytes (they came with the
		// head), so that the drain reads all of it and nothing more is there.
		select {
		case <-firstToken:
		case <-over:
			return
		}
		tail := strings.Repeat("x", 256<<10)
		if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(tail), tail); err != nil {
			return
		}
		<-over
	})
	c, err := New("http://"+ln.Addr().String(), WithDrainGrace(2*time.Second))
	require.NoError(t, err)
	defer c.CloseIdleConnections()
	got := make(chan *Result, 1)
	go func() {
		got <- c.Do(context.Background(), &Request{ID: "tail", Model: "ref", Stream: true, Deadlines: dl},
			&cancelOnFirst{cancel: func() { close(firstToken) }})
	}()
	select {
	case res := <-got:
		require.Equal(t, ledger.OutcomeOK, res.Outcome, res.Err)
	case <-time.After(30 * time.Second):
		t.Fatal("the request is held by the drain of its body's tail")
	}
}
