package scenarios

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResolvePlainLinkName: a launched topology's link named without "->" (SGLang's
// bootstrap port) is a fault target, as the "valid targets" list promises.
func TestResolvePlainLinkName(t *testing.T) {
	sc := &Scenario{Target: Target{URL: "http://x",
		Launch: []Launch{{Name: "router", Role: "router"}, {Name: "decode", Role: "decode"}},
		Links:  []ProxyLink{{Name: "router->decode", Upstream: "127.0.0.1:1"}, {Name: "bootstrap", Upstream: "127.0.0.1:2"}}}}
	topo := sc.Topology()
	tests := []struct {
		target  string
		kind    TargetKind
		ok      bool
		members []string
	}{
		{"bootstrap", TargetLink, true, []string{"bootstrap"}},
		{"router->decode", TargetLink, true, []string{"router->decode"}},
		{"decode", TargetProcess, true, []string{"decode"}},
		{"boot", 0, false, nil},
		{"bootstrap->decode", 0, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			k, ok := topo.Resolve(tt.target)
			assert.Equal(t, tt.kind, k)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.members, topo.Members(tt.target))
		})
	}
	assert.Contains(t, topo.Names(TargetLink), "bootstrap", "listed as valid")
}

// TestFaultOnPlainLinkValidates: a scenario whose fault targets the bootstrap link loads.
func TestFaultOnPlainLinkValidates(t *testing.T) {
	src := `
name: boot
duration: 10s
target:
  url: http://127.0.0.1:30000
  links:
    - {name: router->decode, upstream: "127.0.0.1:30200"}
    - {name: bootstrap, upstream: "127.0.0.1:8998"}
  launch:
    - {name: decode, role: decode, command: [sleep, "100"]}
workloads: [{name: a, type: agents, agents: 1}]
faults:
  - {name: cut, type: network_partition, target: bootstrap, at: 2s, for: 2s}
assertions: [no_silent_drops]
`
	sc, err := Parse("boot.yaml", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, "bootstrap", sc.Faults[0].Target)
}
