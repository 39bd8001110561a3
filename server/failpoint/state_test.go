package failpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestState: a State goes through Enable, evaluations and Disable as a registry's
// point does (the simulator keeps its failpoints in States): the same Status after
// each step, the counts kept by Disable and restarted by the next Enable.
func TestState(t *testing.T) {
	const name = "engine/admit"
	r := NewRegistry()
	var s State
	always := func(float64) bool { return true }
	same := func(step string, want Status) {
		t.Helper()
		got, ok := r.Get(name)
		require.True(t, ok)
		assert.Equal(t, want, got, "registry, %s", step)
		assert.Equal(t, want, s.Describe(name), "state, %s", step)
	}
	enable := func(terms string) {
		require.NoError(t, r.Enable(name, terms))
		chain, err := ParseTerms(terms)
		require.NoError(t, err)
		s.Enable(terms, chain)
	}
	eval := func(n int) {
		for range n {
			_, _ = r.Eval(context.Background(), name)
			s.Fire(always)
		}
	}

	enable(" 2*return(x)->off ")
	eval(3)
	same("enabled", Status{Name: name, Terms: "2*return(x)->off", Enabled: true, Evals: 3, Hits: 2})
	require.NoError(t, r.Disable(name))
	s.Disable()
	eval(2)
	same("disabled", Status{Name: name, Evals: 3, Hits: 2})
	assert.Nil(t, s.Fire(always), "a disabled failpoint fires nothing")
	enable("return(y)")
	same("enabled again", Status{Name: name, Terms: "return(y)", Enabled: true})
}
