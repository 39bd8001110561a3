package workload

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestProbeRounds: a probe workload sends its Count prompts once per interval, the same
// prompt text for the same probe in every round, greedy.
func TestProbeRounds(t *testing.T) {
	sc, err := scenarios.Parse("p.yaml", []byte(`name: p
duration: 250ms
workloads:
  - {name: probe, type: probe, count: 2, interval: 100ms, max_tokens: 4, endpoint: completions}
assertions: [consistent_outputs]
`))
	require.NoError(t, err)
	w, err := New(sc, 0)
	require.NoError(t, err)
	f := &fakeSender{}
	st := w.Run(context.Background(), time.Now(), f)
	require.Equal(t, 6, st.Requests, "rounds at 0, 100 and 200 ms of a 250 ms window")
	prompts := map[string]string{}
	ids := map[string]bool{}
	for _, r := range f.reqs {
		assert.Zero(t, r.Temperature)
		assert.False(t, ids[r.ID], "duplicate id %s", r.ID)
		ids[r.ID] = true
		require.NotEmpty(t, r.Probe)
		if p, ok := prompts[r.Probe]; ok {
			assert.Equal(t, p, r.Prompt, "probe %s changed its prompt", r.Probe)
		}
		prompts[r.Probe] = r.Prompt
	}
	assert.Len(t, prompts, 2)
	assert.NotEqual(t, prompts["probe/p0"], prompts["probe/p1"])
}

// TestProbeValidation: consistent_outputs needs a probe workload, and probes are greedy.
func TestProbeValidation(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"assertion without probes", "name: p\nworkloads:\n  - {type: burst, count: 1}\nassertions: [consistent_outputs]\n",
			"no workload of type probe"},
		{"a probe with temperature", "name: p\nworkloads:\n  - {type: probe, temperature: 0.7}\n", "must be 0"},
		{"interval on another type", "name: p\nworkloads:\n  - {type: burst, count: 1, interval: 1s}\n", "only applies to type probe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenarios.Parse("p.yaml", []byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
