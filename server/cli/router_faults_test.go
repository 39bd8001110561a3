package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/failpoint"
)

// The router's /health tells the truth (no worker answers: 503) until the api/health
// failpoint, enabled over the router's own admin API, makes it lie (200).
func TestRouterHealthFailpoint(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tok, []byte("s3cret\n"), 0o600))
	f := defaultRouterFlags()
	f.port, f.prefill, f.decode = 0, []string{"http://127.0.0.1:1"}, []string{"http://127.0.0.1:2"}
	f.healthInterval, f.healthTimeout = secondsValue(50*time.Millisecond), secondsValue(time.Second)
	f.modelName, f.contextLength, f.logLevel = "ref", 512, "error"
	f.faults = routerFaults{enable: true, tokenFile: tok}
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
		assert.NoError(t, <-done)
	}()

	st, body := getText(t, url+"/health")
	assert.Equal(t, 503, st, "no healthy pair: the truth: %s", body)
	c := failpoint.NewClient(url, "s3cret")
	_, err := c.Enable(context.Background(), failpoint.APIHealth, "return(ok)")
	require.NoError(t, err)
	defer func() { _ = failpoint.Disable(failpoint.APIHealth) }()
	st, _ = getText(t, url+"/health")
	assert.Equal(t, 200, st, "the failpoint makes /health lie")
	require.NoError(t, c.Disable(context.Background(), failpoint.APIHealth))
	st, _ = getText(t, url+"/health")
	assert.Equal(t, 503, st)

	_, err = failpoint.NewClient(url, "wrong").Enable(context.Background(), failpoint.APIHealth, "return(ok)")
	require.Error(t, err, "the admin API wants the token")
}
