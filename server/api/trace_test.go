package api

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// TestTraceparentInDebugRequestsAndLogs: a request that comes with a traceparent shows
// its trace id in /debug/requests while it is in flight, and its log lines carry the
// trace id beside the request id; once it is over the id is gone from the table; an
// invalid traceparent is ignored (the request is served, it joins no trace).
func TestTraceparentInDebugRequestsAndLogs(t *testing.T) {
	release := make(chan struct{})
	f := &fakeGen{started: make(chan struct{}, 4),
		script: func(e *emitter) {
			select {
			case <-release:
			case <-e.ctx.Done():
			}
			e.text("ok", "stop")
		},
		requests: []gen.RequestInfo{{ID: "traced", Stage: "running"}, {ID: "bad-header", Stage: "running"}, {ID: "other", Stage: "waiting"}}}
	logs := &testutil.SyncBuffer{}
	srv, _ := startServer(t, f, WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	tp := traceparent.Derive(9, "traced")

	done := make(chan response, 2)
	go func() {
		done <- do(t, "POST", srv.URL+"/v1/chat/completions", chatBody, map[string]string{"X-Request-ID": "traced", "traceparent": tp.String()})
	}()
	go func() {
		done <- do(t, "POST", srv.URL+"/v1/chat/completions", chatBody, map[string]string{"X-Request-ID": "bad-header", "traceparent": "00-zz"})
	}()
	<-f.started
	<-f.started

	debug := func() map[string]string {
		var dr DebugRequests
		require.NoError(t, json.Unmarshal(do(t, "GET", srv.URL+"/debug/requests", "", nil).body, &dr))
		out := map[string]string{}
		for _, r := range dr.Requests {
			out[r.ID] = r.TraceID
		}
		return out
	}
	assert.Equal(t, map[string]string{"traced": tp.TraceIDHex(), "bad-header": "", "other": ""}, debug())
	close(release)
	for range 2 {
		r := <-done
		assert.Equal(t, 200, r.status, string(r.body))
	}
	assert.Equal(t, map[string]string{"traced": "", "bad-header": "", "other": ""}, debug(), "the table forgets finished requests")

	var received []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == "request received" || m["msg"] == "request finished" {
			received = append(received, m)
		}
	}
	require.Len(t, received, 4, logs.String())
	for _, m := range received {
		if m["rid"] == "traced" {
			assert.Equal(t, tp.TraceIDHex(), m["trace_id"], "%v", m)
		} else {
			assert.NotContains(t, m, "trace_id")
		}
	}
	assert.NotContains(t, logs.String(), "00-zz", "a header value is never logged")
}

func TestTraceTableCountsReusedIDs(t *testing.T) {
	var tt traceTable
	tt.add("r", "a")
	tt.add("r", "a")
	tt.remove("r")
	reqs := []gen.RequestInfo{{ID: "r"}}
	got := tt.fill(reqs)
	assert.Equal(t, "a", got[0].TraceID, "one of two requests with the id is still in flight")
	assert.Empty(t, reqs[0].TraceID, "the inspector's slice is not written")
	tt.remove("r")
	assert.Empty(t, tt.fill(reqs)[0].TraceID)
}
