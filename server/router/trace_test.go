package router

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
	"pdsoak/traceparent"
)

// TestLegsCarryTheClientsTraceparent: both legs of a request join the client's trace,
// through the router's own leg client and through a WithClient http.Client; a request
// without one sends none.
func TestLegsCarryTheClientsTraceparent(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"leg client", nil},
		{"http client", []Option{WithClient(&http.Client{Timeout: time.Minute})}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string][]string{} // request id -> traceparents the workers saw
			record := func(next func(http.ResponseWriter, *http.Request, gen.WorkerRequest)) func(http.ResponseWriter, *http.Request, gen.WorkerRequest) {
				return func(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
					mu.Lock()
					seen[r.Header.Get("X-Request-ID")] = append(seen[r.Header.Get("X-Request-ID")], r.Header.Get("traceparent"))
					mu.Unlock()
					next(w, r, wr)
				}
			}
			p := newFake(t, "127.0.0.1:9001", record(prefillOK))
			d := newFake(t, "", record(decodeOK))
			r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, tt.opts...)

			tp := traceparent.Derive(3, "traced")
			ch, err := r.Generate(traceparent.NewContext(context.Background(), tp), req("traced"))
			require.NoError(t, err)
			_, final := collect(t, ch)
			require.NoError(t, final.Err)
			ch, err = r.Generate(context.Background(), req("plain"))
			require.NoError(t, err)
			_, final = collect(t, ch)
			require.NoError(t, final.Err)

			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{tp.String(), tp.String()}, seen["traced"], "prefill and decode legs")
			assert.Equal(t, []string{"", ""}, seen["plain"])
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		})
	}
}
