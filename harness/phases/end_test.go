package phases

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEndOrder: a run's end steps run once each, in End's order, nil ones skipped, and
// both errors come back.
func TestEndOrder(t *testing.T) {
	var got []string
	step := func(name string) func() { return func() { got = append(got, name) } }
	fe, se := errors.New("faults"), errors.New("self")
	faultErr, selfErr := End{
		SelfCheck:    func() error { got = append(got, "self"); return se },
		CheckLeaks:   step("leaks"),
		StopSamplers: step("samplers"),
		StopProbes:   step("probes"),
		StopFaults:   func() error { got = append(got, "faults"); return fe },
		StopWatches:  step("watches"),
		StopPD:       step("pd"),
		Drain:        step("drain"),
	}.Run()
	assert.Equal(t, []string{"drain", "pd", "watches", "faults", "probes", "samplers", "leaks", "self"}, got,
		"StopHealth is nil: skipped")
	assert.Same(t, fe, faultErr)
	assert.Same(t, se, selfErr)
	f, s := End{}.Run()
	assert.NoError(t, f)
	assert.NoError(t, s)
}
