package reports

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func f64(x float64) *float64 { return &x }
func u64(x uint64) *uint64   { return &x }

func sched(id string, sec float64) ledger.Event {
	return ev(ledger.EventScheduled, sec, func(e *ledger.Event) { e.RequestID = id })
}

// gpuSample is a GPU sample event with one reading per utilisation given.
func gpuSample(sec float64, utils ...float64) ledger.Event {
	return ev(ledger.EventSample, sec, func(e *ledger.Event) {
		e.Source = ledger.GPUSource
		for i, u := range utils {
			e.GPUs = append(e.GPUs, ledger.GPU{Index: i, Name: "H200", UUID: "GPU-" + string(rune('a'+i)),
				Util: f64(u), MemUsed: u64(40 << 30), MemTotal: u64(80 << 30)})
		}
	})
}

func TestGPUResult(t *testing.T) {
	tests := []struct {
		name   string
		events []ledger.Event
		want   *GPUResult // nil: no gpu section
	}{
		{
			name:   "no GPU samples: no section",
			events: []ledger.Event{sched("a", 0), done("a", 1, ledger.OutcomeOK)},
		},
		{
			name: "busy GPUs, requests completing: nothing stuck",
			events: []ledger.Event{
				sched("a", 0), sched("b", 0.5), gpuSample(1, 90, 70),
				done("a", 1.5, ledger.OutcomeOK), gpuSample(2, 80, 60), done("b", 2.5, ledger.OutcomeRejected),
			},
			want: &GPUResult{Devices: []string{"0: H200 GPU-a", "1: H200 GPU-b"}, Samples: 2,
				UtilMax: 90, UtilMean: 75, MemUsedMaxPct: 50,
				// the first sample: b and a in flight and nothing completed since a was scheduled
				StuckSamples: 1, StuckSeconds: 1, StuckInFlightMax: 2, StuckUtilMean: f64(80)},
		},
		{
			name: "the incident: requests hang while the GPUs sit idle",
			events: []ledger.Event{
				sched("a", 0), sched("b", 0), sched("c", 0), done("a", 0.5, ledger.OutcomeOK), gpuSample(2, 50),
				gpuSample(4, 0), gpuSample(6, 0),
				done("b", 7, ledger.OutcomeStalled), done("c", 7, ledger.OutcomeDeadlineExceeded), gpuSample(8, 0),
			},
			want: &GPUResult{Devices: []string{"0: H200 GPU-a"}, Samples: 4, UtilMax: 50, UtilMean: 12.5,
				MemUsedMaxPct: 50, StuckSamples: 2, StuckSeconds: 4, StuckInFlightMax: 2, StuckUtilMean: f64(0)},
		},
		{
			name: "a reading without utilisation counts as an error, not as 0%",
			events: []ledger.Event{
				sched("a", 0),
				ev(ledger.EventSample, 2, func(e *ledger.Event) {
					e.Source = ledger.GPUSource
					e.GPUs = []ledger.GPU{{Index: 0, Errors: []string{"utilization: ERROR_GPU_IS_LOST"}}}
				}),
				done("a", 3, ledger.OutcomeOK),
			},
			want: &GPUResult{Devices: []string{"0:"}, Samples: 1, StuckSamples: 1, StuckSeconds: 2,
				StuckInFlightMax: 1, ReadErrors: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.events, Config{}).GPU
			gj, err := json.Marshal(got)
			require.NoError(t, err)
			wj, err := json.Marshal(tt.want)
			require.NoError(t, err)
			assert.JSONEq(t, string(wj), string(gj), "gpu section")
		})
	}
}

// An event written by a newer harness round-trips, and an old ledger without GPUs
// decodes as before.
func TestGPUEventJSON(t *testing.T) {
	in := gpuSample(1, 0)
	in.InFlight = 30
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"util":0`, "a 0% reading must be written")
	var out ledger.Event
	require.NoError(t, json.Unmarshal(b, &out))
	require.Len(t, out.GPUs, 1)
	require.NotNil(t, out.GPUs[0].Util)
	assert.Zero(t, *out.GPUs[0].Util)
	assert.Equal(t, 30, out.InFlight)
	plain, err := json.Marshal(ev(ledger.EventSample, 0, func(e *ledger.Event) { e.Metrics = map[string]float64{"x": 1} }))
	require.NoError(t, err)
	assert.NotContains(t, string(plain), "gpus", "a plain sample must not mention gpus")
}
