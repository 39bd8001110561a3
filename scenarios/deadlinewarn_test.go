package scenarios

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func loadPack(t *testing.T, file string, edit func(string) string, d time.Duration) *Scenario {
	t.Helper()
	data, err := os.ReadFile("targets/" + file)
	require.NoError(t, err)
	src := string(data)
	if edit != nil {
		src = edit(src)
	}
	env := map[string]string{"MODEL_PATH": "m", "VLLM_PROXY": "/p.py"}
	sc, err := Parse(file, []byte(src), WithKnownFaults("process_pause", "network_partition", "network_latency", "process_kill", "connection_reset"),
		WithEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }),
		WithOverrides(func(sc *Scenario) { sc.Duration = Duration(d) }))
	require.NoError(t, err)
	return sc
}

// vllm-pd as it shipped before (prefill paused a tenth of the run) paused prefill for 3
// minutes at its documented --duration 30m, against a 120 s first-token deadline.
func TestDeadlineWarningFiresOnStretchedPause(t *testing.T) {
	old := func(s string) string {
		return strings.Replace(s, "target: prefill, at: 20s, for: 4s}", "target: prefill, at: 20s, for: 10s}", 1)
	}
	w := loadPack(t, "vllm-pd.yaml", old, 30*time.Minute).DeadlineWarnings()
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "fault pause-prefill (process_pause on prefill) holds requests for 3m0s")
	assert.Contains(t, w[0], "for 10s becomes 3m0s")
	assert.Contains(t, w[0], "longer than deadlines.first_token (2m0s)")
	// A paused colocated server also stops the streams it serves: the stall deadline.
	w = loadPack(t, "sglang-colocated.yaml", func(s string) string { return strings.Replace(s, "for: 3s}", "for: 10s}", 1) }, 30*time.Minute).DeadlineWarnings()
	require.Len(t, w, 1)
	assert.Contains(t, w[0], "longer than deadlines.stall (1m0s)")
}

// The shipped packs give a correct server time to answer at every duration their
// headers document.
func TestShippedPacksFitTheirDeadlines(t *testing.T) {
	for _, p := range []string{"vllm-pd.yaml", "sglang-colocated.yaml", "sglang-pd.yaml", "vllm-single.yaml"} {
		for _, d := range []time.Duration{30 * time.Second, time.Minute, 10 * time.Minute, 30 * time.Minute} {
			assert.Empty(t, loadPack(t, p, nil, d).DeadlineWarnings(), "%s at %v", p, d)
		}
	}
}
