package failpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTally: evaluations, hits and holders counted as the registry's Status reports
// them; a release counts once; Reset restarts only Evals and Hits.
func TestTally(t *testing.T) {
	chain, err := ParseTerms("1*off->2*pause->sleep(10ms)")
	require.NoError(t, err)
	var tl Tally
	never := func(float64) bool { return false }
	assert.Nil(t, tl.Eval(chain, never), "off fires nothing: not a hit")
	var releases []func()
	for range 3 {
		f := tl.Eval(chain, never)
		require.NotNil(t, f)
		releases = append(releases, tl.Hold(f.Action))
	}
	assert.Equal(t, Status{Name: "x", Terms: "t", Enabled: true, Evals: 4, Hits: 3, Paused: 2, Sleeping: 1},
		tl.Status("x", "t", true))
	releases[0]()
	releases[0]()
	releases[2]()
	tl.Hold(ActReturn)() // holds nothing
	tl.Reset()
	assert.Equal(t, Status{Name: "x", Paused: 1}, tl.Status("x", "", false))
}

// TestDraw: a percentage draw hits under percent; 100 and 0 decide without drawing (the
// generator's sequence is the same whatever those terms).
func TestDraw(t *testing.T) {
	draws := 0
	u := func(v float64) func() float64 { return func() float64 { draws++; return v } }
	assert.True(t, Draw(50, u(0.4)))
	assert.False(t, Draw(50, u(0.5)))
	assert.True(t, Draw(100, u(0.99)))
	assert.False(t, Draw(0, u(0)))
	assert.False(t, Draw(-1, u(0)))
	assert.Equal(t, 2, draws)
}
