package chaos

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestCheckTargetIsApplysRule: CheckTarget refuses exactly what Apply refuses on the
// target's roles (the simulator refuses a run up front with it), and applies nothing.
func TestCheckTargetIsApplysRule(t *testing.T) {
	procs := map[string]Process{
		"prefill-0": {Name: "prefill-0", Role: "prefill"},
		"decode-0":  {Name: "decode-0", Role: "decode"},
	}
	env := &FuncEnv{
		MembersFunc: func(target string) []string {
			if target == "nobody" {
				return nil
			}
			return []string{target}
		},
		ProcessFunc: func(name string) (Process, error) {
			if p, ok := procs[name]; ok {
				return p, nil
			}
			return Process{}, fmt.Errorf("no process %s", name)
		},
	}
	for _, tc := range []struct {
		name   string
		f      scenarios.Fault
		wantOK bool
	}{
		{"decode_crash on decode", scenarios.Fault{Name: "f", Type: "decode_crash", Target: "decode-0"}, true},
		{"decode_crash on prefill", scenarios.Fault{Name: "f", Type: "decode_crash", Target: "prefill-0"}, false},
		{"prefill_crash on prefill", scenarios.Fault{Name: "f", Type: "prefill_crash", Target: "prefill-0"}, true},
		{"an unknown process", scenarios.Fault{Name: "f", Type: "process_kill", Target: "ghost"}, false},
		{"a target naming nothing", scenarios.Fault{Name: "f", Type: "process_kill", Target: "nobody"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTarget(tc.f, env)
			if tc.wantOK {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			// Apply refuses the same fault with the same words, before it signals anything.
			f, nerr := New(tc.f)
			require.NoError(t, nerr)
			aerr := f.Apply(context.Background(), env)
			require.Error(t, aerr)
			assert.Equal(t, aerr.Error(), err.Error())
		})
	}
	assert.ErrorIs(t, CheckTarget(scenarios.Fault{Name: "f", Type: "no_such_fault"}, env), ErrUnknownType)
}
