package harness

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/client"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// target.tls reaches the client: a CA file verifies an https target whose certificate
// the system does not trust, server_name is the name verified, and without either the
// request fails its handshake; target.headers are sent.
func TestClientOptionsTLSAndHeaders(t *testing.T) {
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	tests := []struct {
		name string
		tls  *scenarios.TLS
		want ledger.Outcome
	}{
		{"CA file", &scenarios.TLS{CAFile: ca}, ledger.OutcomeOK},
		{"CA file, server name the certificate holds", &scenarios.TLS{CAFile: ca, ServerName: "example.com"}, ledger.OutcomeOK},
		{"CA file, wrong server name", &scenarios.TLS{CAFile: ca, ServerName: "other.test"}, ledger.OutcomeTransportError},
		{"verification off", &scenarios.TLS{InsecureSkipVerify: true}, ledger.OutcomeOK},
		{"no tls: untrusted", nil, ledger.OutcomeTransportError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &scenarios.Scenario{Target: scenarios.Target{URL: srv.URL, TLS: tt.tls, Headers: scenarios.Headers{"Authorization": "Bearer k"}}}
			opts, err := clientOptions(sc)
			require.NoError(t, err)
			c, err := client.New(srv.URL, opts...)
			require.NoError(t, err)
			defer c.CloseIdleConnections()
			res := c.Do(context.Background(), &client.Request{ID: "t", Model: "ref", Deadlines: client.Deadlines{Total: 30 * time.Second}}, nil)
			assert.Equal(t, tt.want, res.Outcome, res.Err)
			if tt.want == ledger.OutcomeOK {
				assert.Equal(t, "Bearer k", auth)
			}
		})
	}
}
