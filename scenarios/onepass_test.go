package scenarios

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One validate shows every problem: those of the strict decoder (a bad duration, an
// unknown field) and those of the validator (a misspelled assertion, deadlines in the
// wrong order), not the second kind only once the first is fixed.
func TestValidateInOnePass(t *testing.T) {
	src := `name: x
duration: 30 s
workloads:
  - {name: a, type: agents, agentz: 3}
deadlines: {first_token: 60s, total: 30s}
assertions: [no_silent_drop]
faults:
  - {name: k, type: decode_crash, target: decode, at: soon}
`
	_, err := Parse("bad.yaml", []byte(src), WithKnownFaults("decode_crash"))
	var probs Problems
	require.True(t, errors.As(err, &probs), "%v", err)
	got := map[string]int{}
	for _, p := range probs {
		got[p.Path] = p.Line
	}
	assert.Equal(t, map[string]int{"duration": 2, "workloads[0].agentz": 4, "deadlines.first_token": 5,
		"assertions[0]": 6, "faults[0].at": 8}, got, "problems:\n%v", err)
}

func TestSplitPath(t *testing.T) {
	assert.Equal(t, []pathSeg{{key: "workloads"}, {index: 0}, {key: "pacer"}, {key: "rate"}}, splitPath("workloads[0].pacer.rate"))
	assert.Equal(t, []pathSeg{{key: "a"}, {index: 1}, {index: 2}}, splitPath("a[1][2]"))
	assert.Equal(t, []pathSeg{{key: "a"}}, splitPath("a[x]"))
}

func FuzzSplitPath(f *testing.F) {
	for _, s := range []string{"workloads[0].pacer.rate", "a[1][2]", "a[", "[3]", ".", "a[-1]", "target.metrics_urls.prefill-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, seg := range splitPath(s) {
			if seg.key == "" && seg.index < 0 {
				t.Fatalf("%q: negative index", s)
			}
		}
	})
}
