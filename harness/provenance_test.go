package harness

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"pdsoak/ledger"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPUModel(t *testing.T) {
	tests := []struct {
		name, cpuinfo, want string
	}{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\nprocessor\t: 1\nmodel name\t: other\n",
			"Intel(R) Xeon(R) Platinum 8480+"},
		{"arm with Hardware", "processor\t: 0\nBogoMIPS\t: 50.00\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B\n", "BCM2835"},
		{"arm with Model only", "processor\t: 0\nModel\t\t: Raspberry Pi 4 Model B\n", "Raspberry Pi 4 Model B"},
		{"numeric model is not a name", "model\t\t: 85\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, cpuModel(strings.NewReader(tt.cpuinfo)))
		})
	}
}

func TestCPUString(t *testing.T) {
	assert.Equal(t, "Xeon (16 CPUs)", cpuString("Xeon", 16))
	assert.Equal(t, "1 CPU", cpuString("", 1))
}

func FuzzCPUModel(f *testing.F) {
	f.Add("model name\t: Intel(R) Xeon(R)\n")
	f.Add("Hardware : x\nModel : 7\n")
	f.Fuzz(func(t *testing.T, in string) {
		got := cpuModel(strings.NewReader(in))
		require.Equal(t, strings.TrimSpace(got), got)
		require.NotContains(t, got, "\n")
	})
}

func TestServerVersion(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"object", `{"version":"0.4.6.post1"}`, "0.4.6.post1"},
		{"server_info", `{"model_path":"x","version":"0.5.0","tp_size":1}`, "0.5.0"},
		{"bare string", `"1.2.3"`, "1.2.3"},
		{"number", `{"version":3}`, ""},
		{"no version", `{"model":"x"}`, ""},
		{"multi-line", `{"version":"1.0\nbuilt by ci"}`, "1.0"},
		{"not JSON", `v1`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, serverVersion([]byte(tt.body)))
		})
	}
}

func FuzzServerVersion(f *testing.F) {
	f.Add([]byte(`{"version":"0.4.6"}`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := serverVersion(body)
		require.LessOrEqual(t, len(got), 100)
		require.NotContains(t, got, "\n")
	})
}

// The target event holds what the target says about itself; whatever it does not say
// is left out, and nothing it answers stops the run.
func TestTargetInfo(t *testing.T) {
	const models = `{"object":"list","data":[{"id":"m","object":"model"}]}`
	tests := []struct {
		name       string
		routes     map[string]string // path -> JSON body; others 404
		wantModels string
		wantVer    string
	}{
		{"vllm-like", map[string]string{"/v1/models": models, "/version": `{"version":"0.6.3"}`}, models, "0.6.3"},
		{"sglang server_info", map[string]string{"/v1/models": models, "/server_info": `{"version":"0.4.6","tp_size":2}`}, models, "0.4.6"},
		{"/version wins", map[string]string{"/version": `{"version":"a"}`, "/server_info": `{"version":"b"}`}, "", "a"},
		{"nothing", nil, "", ""},
		{"models not JSON", map[string]string{"/v1/models": "<html>"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, ok := tt.routes[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				fmt.Fprint(w, body)
			}))
			defer srv.Close()
			ev := targetInfo(context.Background(), srv.Client(), slog.New(slog.DiscardHandler), srv.URL)
			assert.Equal(t, ledger.EventTarget, ev.Type)
			assert.Equal(t, srv.URL, ev.URL)
			if tt.wantModels == "" {
				assert.Empty(t, ev.Models)
			} else {
				assert.JSONEq(t, tt.wantModels, string(ev.Models))
			}
			assert.Equal(t, tt.wantVer, ev.ServerVersion)
		})
	}
}
