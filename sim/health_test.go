package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/phases"
	"pdsoak/ledger"
	"pdsoak/reports"
)

// TestSimHealthEvents: the simulated prober records the entry's health events as the
// runner does (phases.Health): one per probe of the router from the start of the probes
// to the end of the drain, the router's /health by its own rule (200 while a pair is
// routable, 503 once its checks marked decode down), a hung probe of a paused router
// as phases.ErrHealthTimeout; truthful_health is then judged on them.
func TestSimHealthEvents(t *testing.T) {
	tests := []struct {
		name, fault string
		want        map[string]int // status or error of the probes during the fault
	}{
		{"decode killed for good", "{name: k, type: decode_crash, target: decode-0, at: 2s, for: 1s, params: {restart: false}}",
			map[string]int{"503": 1}},
		{"router paused", "{name: p, type: process_pause, target: router, at: 2s, for: 3s}",
			map[string]int{phases.ErrHealthTimeout.Error(): 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := fmt.Sprintf(livenessYAML, tt.fault)
			yaml = yaml[:len(yaml)-len("assertions: [no_silent_drops]\n")] + "assertions: [truthful_health]\n"
			evs, res := simulateTopology(t, yaml)
			start := ofType(evs, ledger.EventRunStart)[0].Time
			drain := ofType(evs, ledger.EventDrain)
			require.Len(t, drain, 1)
			h := ofType(evs, ledger.EventHealth)
			require.NotEmpty(t, h)
			seen := map[string]int{}
			for _, e := range h {
				assert.Equal(t, "router", e.Source)
				assert.False(t, e.Time.After(drain[0].Time), "a health event after the drain")
				at := e.Time.Sub(start)
				key := fmt.Sprint(e.Status)
				if e.Error != "" {
					key = e.Error
				}
				if at < 2*time.Second {
					assert.Equal(t, 200, e.Status, "before the fault, at %v", at)
				} else if tt.want[key] > 0 {
					seen[key] = 1
				}
			}
			assert.Equal(t, tt.want, seen, "the probes during the fault")
			for _, a := range res.Assertions {
				if a.Name == reports.AssertTruthfulHealth {
					assert.True(t, a.Passed, a.Detail)
					return
				}
			}
			t.Fatal("truthful_health not judged")
		})
	}
}
