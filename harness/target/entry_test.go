package target

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestEntryHealthFollowsTheLaunchedEntry: the health probed for truthful_health is the
// entry process's own health path, asked through target.url. vLLM's toy PD proxy, the
// entry of vllm-pd, has /healthcheck and no /health (tests/v1/kv_connector/
// nixl_integration/toy_proxy_server.py at vllm 030ea52e): probing its /health got 404
// every time, so no window could ever count as health saying 200 and truthful_health
// passed whatever the proxy did.
func TestEntryHealthFollowsTheLaunchedEntry(t *testing.T) {
	for _, tc := range []struct {
		pack, proc, url string
	}{
		{"vllm-pd.yaml", "proxy", "http://127.0.0.1:8192/healthcheck"},
		{"sglang-pd.yaml", "router", "http://127.0.0.1:30000/readiness"}, // SGLang router: /health is liveness
		// target.url is the client->server proxy: health goes the way requests go.
		{"sglang-colocated.yaml", "server", "http://127.0.0.1:40000/health"},
	} {
		t.Run(tc.pack, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "targets", tc.pack))
			require.NoError(t, err)
			env := map[string]string{"MODEL_PATH": "/m", "VLLM_PROXY": "/p.py"}
			sc, err := scenarios.Parse(tc.pack, data, scenarios.WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
			require.NoError(t, err)
			base := sc.Target.URL
			if tc.pack == "sglang-colocated.yaml" {
				base = "http://127.0.0.1:40000" // {link:client->server} as the runner expands it
			}
			proc, url := EntryHealth(sc, base)
			assert.Equal(t, tc.proc, proc)
			assert.Equal(t, tc.url, url)
		})
	}
}
