package scenarios

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const headerBase = "name: h\nworkloads:\n  - type: burst\n    count: 1\n"

func TestHeadersDecodeExpandAndRedact(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "API_KEY" {
			return "sk-live-123", true
		}
		return "", false
	}
	sc, err := Parse("h.yaml", []byte(headerBase+"    headers: {X-Cohort: blue}\ntarget:\n  url: https://gw.example:443\n  idle_timeout: 2s\n"+
		"  tls: {server_name: gw.internal, insecure_skip_verify: true}\n  headers:\n    Authorization: \"Bearer ${API_KEY}\"\n    x-route: p1\n"), WithEnv(lookup))
	require.NoError(t, err)
	assert.Equal(t, "Bearer sk-live-123", sc.Target.Headers["Authorization"], "expanded for sending")
	h := sc.Target.Headers.HTTP(sc.Workloads[0].Headers)
	assert.Equal(t, "p1", h.Get("X-Route"), "canonical names")
	assert.Equal(t, "blue", h.Get("X-Cohort"))
	assert.Equal(t, "2s", sc.Target.IdleTimeout.String())
	assert.Equal(t, "gw.internal", sc.Target.TLS.ServerName)

	js, err := json.Marshal(sc)
	require.NoError(t, err)
	ym, err := yaml.Marshal(sc)
	require.NoError(t, err)
	for _, out := range []string{string(js), string(ym)} {
		assert.NotContains(t, out, "sk-live-123")
		assert.NotContains(t, out, "blue")
		assert.Contains(t, out, "redacted") // JSON escapes < and >
	}
	var buf strings.Builder
	require.NoError(t, Plan(sc).Write(&buf))
	text := buf.String()
	assert.Contains(t, text, "API_KEY="+Redacted)
	assert.NotContains(t, text, "sk-live-123")
}

func TestHeaderProblems(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad name", "target:\n  headers: {\"X Bad\": v}\n", `target.headers: "X Bad" is not a valid header name`},
		{"owned header", "target:\n  headers: {content-length: \"3\"}\n", "target.headers: Content-Length is set by the client itself"},
		{"line break in a value", "target:\n  headers: {X-A: \"a\\r\\nX-Injected: 1\"}\n", "target.headers: the value of X-A has a control character"},
		{"workload header", "    headers: {Host: evil}\n", "workloads[0].headers: Host is set by the client itself"},
		{"tls on http", "target:\n  url: http://127.0.0.1:8080\n  tls: {insecure_skip_verify: true}\n", "target.tls: applies only to an https:// target.url"},
		{"missing CA", "target:\n  url: https://127.0.0.1:8443\n  tls: {ca_file: /nonexistent/ca.pem}\n", "target.tls.ca_file: CA file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("h.yaml", []byte(headerBase+tt.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "X-Injected: 1", "a value is never shown")
		})
	}
	t.Run("CA file without a certificate", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "ca.pem")
		require.NoError(t, os.WriteFile(p, []byte("not a certificate"), 0o644))
		_, err := Parse("h.yaml", []byte(headerBase+"target:\n  url: https://127.0.0.1:8443\n  tls: {ca_file: "+p+"}\n"))
		require.ErrorContains(t, err, "holds no PEM certificate")
	})
}

func TestParseHeaderFlag(t *testing.T) {
	n, v, err := ParseHeaderFlag("Authorization:  Bearer x:y ")
	require.NoError(t, err)
	assert.Equal(t, "Authorization", n)
	assert.Equal(t, "Bearer x:y", v)
	for _, bad := range []string{"no colon", ": value", ""} {
		_, _, err := ParseHeaderFlag(bad)
		require.Error(t, err, bad)
	}
}

// FuzzParseHeaderFlag: any flag text parses or fails cleanly; a parsed name is trimmed.
func FuzzParseHeaderFlag(f *testing.F) {
	for _, s := range []string{"A: b", "x:", ":", "a:b:c", " \t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, _, err := ParseHeaderFlag(s)
		if err == nil {
			require.NotEmpty(t, n)
			require.Equal(t, strings.TrimSpace(n), n)
		}
	})
}
