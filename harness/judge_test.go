package harness

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/harness/target"
)

// JudgeLeaks (the simulator's leak check) judges what the sources said last exactly as
// the runner's leak check does.
func TestJudgeLeaksIsTheRunnersJudgement(t *testing.T) {
	procs := []string{"prefill-0", "decode-0"}
	down := errors.New("connection refused")
	zero := map[string]float64{"sglang:num_running_reqs": 0, "sglang:token_usage": 0.5}
	one := map[string]float64{"sglang:num_running_reqs": 1, "sglang:num_queue_reqs": 0}
	tests := []struct {
		name   string
		latest []map[string]float64
		errs   []error
		want   LeakVerdict
	}{
		{"all zero", []map[string]float64{zero, zero}, []error{nil, nil},
			LeakVerdict{Passed: true, Evaluated: true, Detail: "running and queued gauges at 0 after 2s (2 gauges on 2 endpoints)"}},
		{"one leak", []map[string]float64{zero, one}, []error{nil, nil},
			LeakVerdict{Evaluated: true, Residual: map[string]float64{"decode-0/sglang:num_running_reqs": 1},
				Detail: "not drained after 2s: decode-0/sglang:num_running_reqs = 1"}},
		{"leak seen, then silence", []map[string]float64{zero, one}, []error{nil, down},
			LeakVerdict{Evaluated: true, Residual: map[string]float64{"decode-0/sglang:num_running_reqs": 1},
				Detail: "not drained after 2s: decode-0/sglang:num_running_reqs = 1; decode-0 stopped answering (connection refused)"}},
		{"never answered", []map[string]float64{zero, nil}, []error{nil, down},
			LeakVerdict{Detail: "not evaluated: after 2s, decode-0 never answered (connection refused)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := JudgeLeaks(procs, tt.latest, tt.errs, 2*time.Second)
			assert.Equal(t, tt.want, got)
			// The runner's own state, fed the same answers, says the same.
			st := leakState{srcs: []target.Source{{Process: procs[0]}, {Process: procs[1]}},
				gauges: []map[string]float64{filterLeak(tt.latest[0]), nil}, errs: tt.errs}
			if tt.latest[1] != nil {
				st.gauges[1] = filterLeak(tt.latest[1])
			}
			r := st.judge(2 * time.Second)
			assert.Equal(t, tt.want.Detail, r.detail)
		})
	}
}
