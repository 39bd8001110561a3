package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/metricnames"
)

// TestHealthGauges: the router's collectors write Up's 1/0 (the simulated router's
// /metrics writes the same function): no healthy pair while decode fails its checks,
// worker_up 1 for the prefill that passes them and 0 for the decode that does not.
func TestHealthGauges(t *testing.T) {
	p := newFake(t, "127.0.0.1:1", prefillOK)
	d := newFake(t, "", decodeOK)
	d.healthy.Store(false)
	r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d})
	mfs, err := r.Gatherer().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" {
					key += "{" + l.GetValue() + "}"
				}
			}
			if m.GetGauge() != nil {
				got[key] = m.GetGauge().GetValue()
			}
		}
	}
	assert.Equal(t, Up(false), got[metricnames.RouterHealthyPairs])
	assert.Equal(t, Up(true), got[metricnames.RouterWorkerUp+"{prefill-0}"])
	assert.Equal(t, Up(false), got[metricnames.RouterWorkerUp+"{decode-0}"])
	assert.Equal(t, []float64{0, 1}, []float64{Up(false), Up(true)})
}
