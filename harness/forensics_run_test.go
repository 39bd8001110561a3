package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/forensics"
	"pdsoak/ledger"
)

// The incident's mechanism, small: SGLang semantics and a 768-token decode pool; the
// agents' growing conversations block decode's prealloc queue, requests drop silently,
// and nothing completes while they wait (wedged).
const forensicsYAML = `
name: forensics-incident
seed: 1
duration: 8s
reference:
  prefill: 1
  decode: 1
  backend: tinyref
  semantics: sglang
  decode_args: [--max-total-tokens=768]
workloads:
  - {name: agents, type: agents, agents: 12, turns: 5, max_tokens: 8, prompt_tokens: 32, tool_result_bytes: 64, tool_latency: 200ms, think_time: 200ms}
deadlines: {connect: 3s, first_token: 3s, stall: 3s, total: 5s}
drain: {timeout: 8s, leak_timeout: 3s}
self_check: {max_lag: 5s}
forensics: {wedged_after: 1s}
`

// A run against the real reference server that drops requests silently leaves a
// first-drop bundle and an end bundle, each with every process's /debug/requests and
// goroutine dump, and a note in the ledger pointing at each.
func TestForensicsBundlesOnSilentDrop(t *testing.T) {
	bin := pdserverBinary(t)
	sc := parseScenario(t, forensicsYAML)
	dir := t.TempDir()
	require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}))
	evs := readLedger(t, dir)
	outcomes := checkOneTerminal(t, evs)
	require.Positive(t, outcomes[ledger.OutcomeStalled]+outcomes[ledger.OutcomeDeadlineExceeded], "outcomes %v", outcomes)

	var notes []string
	for _, ev := range eventsOf(evs, ledger.EventNote) {
		if ev.Source == "forensics" {
			notes = append(notes, ev.Detail)
		}
	}
	t.Logf("bundles: %v", notes)
	var firstDrop string
	for _, n := range notes {
		if strings.HasPrefix(n, filepath.Join("forensics", "first-drop-")) {
			firstDrop = n
		}
	}
	require.NotEmpty(t, firstDrop, "no first-drop bundle in %v", notes)
	require.Contains(t, notes, filepath.Join("forensics", "end"))

	procs := []string{"router", "prefill-0", "decode-0"}
	for _, rel := range []string{firstDrop, filepath.Join("forensics", "end")} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			bdir := filepath.Join(dir, rel)
			for _, p := range procs {
				g, err := os.ReadFile(filepath.Join(bdir, "goroutines", p+".txt"))
				require.NoError(t, err, "goroutine dump of %s", p)
				assert.Contains(t, string(g), "goroutine ", p)
				d, err := os.ReadFile(filepath.Join(bdir, "debug-requests", p+".json"))
				require.NoError(t, err, "/debug/requests of %s", p)
				assert.True(t, json.Valid(d), "%s: %s", p, d)
				st, err := os.ReadFile(filepath.Join(bdir, "proc", p+".json"))
				require.NoError(t, err, "/proc state of %s", p)
				assert.Contains(t, string(st), `"threads"`)
				_, err = os.Stat(filepath.Join(bdir, "metrics", p+".txt"))
				assert.NoError(t, err, "/metrics of %s", p)
				_, err = os.Stat(filepath.Join(bdir, "logs", p+".log"))
				assert.NoError(t, err, "log tail of %s", p)
			}
			b, err := os.ReadFile(filepath.Join(bdir, "MANIFEST.json"))
			require.NoError(t, err)
			var m forensics.Manifest
			require.NoError(t, json.Unmarshal(b, &m))
			for _, it := range m.Items {
				if it.Collector == "goroutines" || it.Collector == "debug-requests" {
					assert.Empty(t, it.Error, "%s", it.File)
				}
			}
			_, err = os.Stat(filepath.Join(bdir, "harness-goroutines.txt"))
			assert.NoError(t, err)
			_, err = os.Stat(filepath.Join(bdir, "nvml.json"))
			assert.NoError(t, err)
		})
	}
	// decode's prealloc queue held the first dropped request when the bundle was taken.
	d, err := os.ReadFile(filepath.Join(dir, firstDrop, "debug-requests", "decode-0.json"))
	require.NoError(t, err)
	assert.Contains(t, string(d), "prealloc")
}

func TestGPUIdleFromLatestSample(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		gpus *[]ledger.GPU
		want *bool
	}{
		{"no sample yet", nil, nil},
		{"all idle", &[]ledger.GPU{{Index: 0, Util: f(0)}, {Index: 1, Util: f(5)}}, ptr(true)},
		{"one busy", &[]ledger.GPU{{Index: 0, Util: f(0)}, {Index: 1, Util: f(80)}}, ptr(false)},
		{"utilisation unread", &[]ledger.GPU{{Index: 0}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{lastGPU: new(atomic.Pointer[[]ledger.GPU])}
			if tc.gpus != nil {
				r.lastGPU.Store(tc.gpus)
			}
			assert.Equal(t, tc.want, r.gpuIdle())
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The end-of-run bundle follows reports' verdict: a run that only misses a latency
// threshold (no drop, nothing invalid) gets one, a passing run does not.
func TestEndBundleFollowsTheVerdict(t *testing.T) {
	bin := fakepd(t)
	tests := []struct {
		name       string
		assertions string
		wantEnd    bool
	}{
		{"passing run", "[no_silent_drops, valid_responses]", false},
		{"a threshold fails", "[no_silent_drops, \"p50(e2e) < 1us\"]", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := parseScenario(t, embeddedYAML+"assertions: "+tt.assertions+"\n")
			dir := t.TempDir()
			require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}}))
			var bundles []string
			for _, ev := range eventsOf(readLedger(t, dir), ledger.EventNote) {
				if ev.Source == "forensics" {
					bundles = append(bundles, ev.Detail)
				}
			}
			_, err := os.Stat(filepath.Join(dir, "forensics", "end", "MANIFEST.json"))
			if tt.wantEnd {
				assert.Equal(t, []string{filepath.Join("forensics", "end")}, bundles)
				assert.NoError(t, err)
			} else {
				assert.Empty(t, bundles)
				assert.True(t, os.IsNotExist(err), "no end bundle for a passing run: %v", err)
			}
		})
	}
}
