package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// toyProxy answers as vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py
// (vllm-project/vllm 030ea52effcb05071543c8c42b8f0145e94cee43, and e009930196c9 before
// it), the entry point of scenarios/targets/vllm-pd.yaml: whatever the request, it
// relays decode's bytes under StreamingResponse(..., media_type="application/json"), so
// a stream's SSE comes back as Content-Type: application/json.
func toyProxy(t *testing.T) *fake {
	return newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if !req.Stream {
			fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,`+
				`"message":{"role":"assistant","content":"t0 t1 t2 "},"finish_reason":"length"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
			return
		}
		fl := w.(http.Flusher)
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\n")
		writeTokens(w, fl, 3)
		fmt.Fprint(w, chatChunk("", "length"))
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}

// TestVLLMPDPackThroughToyProxy: the vllm-pd pack's workloads, sent as the pack
// configures them to a server framing its answers as vLLM's toy proxy does, come back
// ok. A streaming workload there is invalid on every request (a stream needs
// text/event-stream), so the pack's expected PASS could never happen.
func TestVLLMPDPackThroughToyProxy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "targets", "vllm-pd.yaml"))
	require.NoError(t, err)
	env := map[string]string{"MODEL_PATH": "/m", "VLLM_PROXY": "/p/toy_proxy_server.py"}
	sc, err := scenarios.Parse("vllm-pd.yaml", data, scenarios.WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	require.NoError(t, err)
	require.NotEmpty(t, sc.Workloads)

	proxy := toyProxy(t)
	c, err := New(proxy.srv.URL)
	require.NoError(t, err)
	for _, w := range sc.Workloads {
		res := c.Do(context.Background(), &Request{ID: w.Name, Endpoint: w.Endpoint, Model: sc.Target.Model,
			Messages: []Message{{Role: "user", Content: "hello"}}, Prompt: "hello",
			MaxTokens: 3, Stream: w.Stream, Deadlines: dl}, nil)
		assert.Equal(t, ledger.OutcomeOK, res.Outcome, "workload %s (stream %v): %s", w.Name, w.Stream, res.Err)
	}
}
