package judge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// JudgeLeaks (the simulator's leak check) judges what the sources said last exactly as
// the runner's polling check (LeakRound) does.
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
			// The runner's polling check, fed one round that answered everywhere and then
			// this round, says the same.
			round := NewLeakRound(procs)
			first := []map[string]float64{tt.latest[0], tt.latest[1]}
			if first[1] == nil {
				round.Update(first, tt.errs, time.Second)
			} else {
				round.Update(first, []error{nil, nil}, time.Second)
			}
			assert.Equal(t, tt.want, round.Update(tt.latest, tt.errs, 2*time.Second))
		})
	}
}

// A leak check judges what each source said last: a pass needs every source to answer
// with every gauge at 0; a gauge above 0 is a fail; anything it cannot tell is not
// evaluated.
func TestJudgeLeaks(t *testing.T) {
	procs := []string{"router", "decode-0"}
	down := errors.New("connection refused")
	zero := map[string]float64{"sglang:num_running_reqs": 0}
	one := map[string]float64{"sglang:num_running_reqs": 1}
	tests := []struct {
		name    string
		gauges  []map[string]float64
		errs    []error
		passed  bool
		skipped bool
		detail  string
	}{
		{"all zero", []map[string]float64{zero, zero}, []error{nil, nil}, true, false, "running and queued gauges at 0"},
		{"one leak", []map[string]float64{zero, one}, []error{nil, nil}, false, false, "not drained after 1s: decode-0/sglang:num_running_reqs = 1"},
		{"leak seen, then silence", []map[string]float64{zero, one}, []error{nil, down}, false, false, "decode-0 stopped answering"},
		{"one never answered", []map[string]float64{zero, nil}, []error{nil, down}, false, true, "not evaluated: after 1s, decode-0 never answered (connection refused)"},
		{"zero seen, then silence", []map[string]float64{zero, zero}, []error{nil, down}, false, true, "not evaluated: after 1s, decode-0 stopped answering"},
		{"no leak gauges", []map[string]float64{{}, {}}, []error{nil, nil}, false, true, "not evaluated: after 1s, no running/queued gauge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := JudgeLeaks(procs, tt.gauges, tt.errs, time.Second)
			assert.Equal(t, tt.passed, v.Passed)
			assert.Equal(t, tt.skipped, !v.Evaluated)
			assert.Contains(t, v.Detail, tt.detail)
			if !v.Evaluated || v.Passed {
				assert.Empty(t, v.Residual)
			}
		})
	}
}

// sglangIdleDecode is an SGLang PD decode worker's /metrics once drained, after a
// retraction in its last stats interval (sgl-project/sglang, collector.py at 00ae9c15
// and scheduler_metrics_mixin.py): sglang:num_retracted_reqs is set from
// self.num_retracted_reqs, the requests retracted since the previous stats log, which is
// then reset to 0; the idle refresh (check_memory, every 30 s) sets the queue gauges
// from the queues again but re-publishes the last num_retracted_reqs as it was. Every
// queue is empty; the 2 is history, not a request held.
const sglangIdleDecode = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:num_decode_prealloc_queue_reqs The number of requests in the decode prealloc queue.
# TYPE sglang:num_decode_prealloc_queue_reqs gauge
sglang:num_decode_prealloc_queue_reqs{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:num_decode_transfer_queue_reqs The number of requests in the decode transfer queue.
# TYPE sglang:num_decode_transfer_queue_reqs gauge
sglang:num_decode_transfer_queue_reqs{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:num_retracted_reqs The number of retracted requests.
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 2.0
# HELP sglang:num_retracted_requests_total Total number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{engine_type="unified",model_name="default",pp_rank="0",tp_rank="0"} 7.0
`

// TestJudgeLeaksSGLangRetractedIsNotHeld: a drained SGLang decode passes the leak check
// although its last interval retracted requests.
func TestJudgeLeaksSGLangRetractedIsNotHeld(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(sglangIdleDecode))
	require.NoError(t, err)
	v := JudgeLeaks([]string{"decode"}, []map[string]float64{m}, []error{nil}, time.Second)
	assert.True(t, v.Passed, v.Detail)
	assert.True(t, v.Evaluated, v.Detail)
}
