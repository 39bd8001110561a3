package api

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/server/gen"
)

// TestOverloadRefusalsAreRateLimited floods a handler with overload refusals: only the
// burst is logged, every refusal still answers 503, the next refusal of another kind says
// how many lines were left out, and no request's "received" line dangles without its end.
func TestOverloadRefusalsAreRateLimited(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	f := &fakeGen{refuse: &gen.OverloadError{RetryAfter: time.Second, Reason: "queue full"}}
	srv, _ := startServer(t, f, WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithRefusalLogRate(time.Hour, 3))
	body := `{"model":"ref","prompt":"hi","max_tokens":2}`
	for range 10 {
		require.Equal(t, 503, post(t, srv.URL+"/v1/completions", body).status)
	}
	assert.Equal(t, 3, strings.Count(logs.String(), `msg="request refused"`), logs.String())
	assert.NotContains(t, logs.String(), "request received", "a refused request was never received")

	f.set(func() { f.refuse = fmt.Errorf("engine: bad: %w", gen.ErrInvalid) })
	require.Equal(t, 400, post(t, srv.URL+"/v1/completions", body).status)
	assert.Equal(t, 4, strings.Count(logs.String(), `msg="request refused"`))
	assert.Contains(t, logs.String(), "overload_refusals_not_logged=7")
}
