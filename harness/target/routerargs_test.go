package target

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/scenarios"
)

// TestRouterArgs: the router always gets the scenario's semantics, so a --semantics
// override of the workers never leaves it strict; reference.router_args come after and
// win.
func TestRouterArgs(t *testing.T) {
	tests := []struct {
		name string
		ref  scenarios.Reference
		want []string
	}{
		{"strict", scenarios.Reference{Semantics: "strict"}, []string{"--semantics", "strict"}},
		{"sglang, router bug", scenarios.Reference{Semantics: "sglang", RouterArgs: []string{"--sglang-bug=prefill-fail-no-decode-abort"}},
			[]string{"--semantics", "sglang", "--sglang-bug=prefill-fail-no-decode-abort"}},
		{"router_args win", scenarios.Reference{Semantics: "sglang", RouterArgs: []string{"--semantics=strict"}},
			[]string{"--semantics", "sglang", "--semantics=strict"}},
		{"fault injection: the router's admin API too", scenarios.Reference{Semantics: "strict", FaultInjection: true, RouterArgs: []string{"--log-level=warn"}},
			[]string{"--semantics", "strict", "--enable-fault-injection", "--log-level=warn"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, RouterArgs(tc.ref))
		})
	}
}
