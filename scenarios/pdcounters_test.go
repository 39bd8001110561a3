package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPDCounters(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		err        []string // substrings of the problems; none: valid
		want       []string // process/selector
	}{
		{name: "embedded PD: every prefill worker's reference counter",
			yaml: "name: t\nreference: {prefill: 2, decode: 1}\nworkloads: [{type: burst, count: 1}]\nassertions: [pd_path]\n",
			want: []string{"prefill-0 pdsoak:prefills_completed_total", "prefill-1 pdsoak:prefills_completed_total"}},
		{name: "colocated: no prefill, pd_path refused",
			yaml: "name: t\nreference: {prefill: 0, decode: 0}\nworkloads: [{type: burst, count: 1}]\nassertions: [pd_path(0.9)]\n",
			err:  []string{"assertions[0]: pd_path(0.9) cannot be evaluated: no prefill counter is known"}},
		{name: "external target names its counter",
			yaml: "name: t\ntarget:\n  url: http://127.0.0.1:1\n  metrics_urls: {p0: http://127.0.0.1:2/metrics}\n" +
				"  pd_counters: {p0: 'vllm:request_success_total{finished_reason=\"length\"}'}\nworkloads: [{type: burst, count: 1}]\nassertions: [pd_path]\n",
			want: []string{`p0 vllm:request_success_total{finished_reason="length"}`}},
		{name: "bad selector and unknown process",
			yaml: "name: t\ntarget:\n  url: http://127.0.0.1:1\n  pd_counters: {p9: 'x{a!=\"1\"}'}\nworkloads: [{type: burst, count: 1}]\n",
			err:  []string{"target.pd_counters.p9", "only = matchers", `"p9" has no metrics endpoint`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse("t.yaml", []byte(tc.yaml))
			if len(tc.err) > 0 {
				require.Error(t, err)
				for _, e := range tc.err {
					assert.Contains(t, err.Error(), e)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, c := range sc.PDCounters() {
				got = append(got, c.Process+" "+c.Selector.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
