package chaos

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/scenarios"
)

func TestDisconnectRules(t *testing.T) {
	var d DisconnectRules
	k, _ := d.CancelAfter("agents", "r1", true)
	assert.Zero(t, k, "no rule")
	all := &LiveStats{}
	d.Set(ClientTarget, 3, 0, all) // fraction 0: every stream
	k, st := d.CancelAfter("agents", "r1", true)
	assert.Equal(t, 3, k)
	assert.Same(t, all, st)
	k, _ = d.CancelAfter("agents", "r1", false)
	assert.Zero(t, k, "only streams")
	d.Set("agents", 5, 0.5, nil)
	hit := 0
	for i := range 1000 {
		k, _ := d.CancelAfter("agents", fmt.Sprintf("agents-%d", i), true)
		if k == 5 {
			hit++
		}
		again, _ := d.CancelAfter("agents", fmt.Sprintf("agents-%d", i), true)
		assert.Equal(t, k, again, "the same request, the same choice")
	}
	assert.InDelta(t, 500, hit, 100, "about half of the streams of the workload's own rule")
	k, _ = d.CancelAfter("steady", "s1", true)
	assert.Equal(t, 3, k, "another workload falls back to the client rule")
	d.Set("agents", 0, 0, nil)
	d.Set(ClientTarget, 0, 0, nil)
	k, _ = d.CancelAfter("agents", "agents-1", true)
	assert.Zero(t, k, "removed")
}

func TestWorkloadFor(t *testing.T) {
	sc := &scenarios.Scenario{Workloads: []scenarios.Workload{{Name: "agents"}, {Name: "steady"}}}
	assert.Equal(t, "steady", WorkloadFor(sc, "steady").Name)
	assert.Equal(t, "agents", WorkloadFor(sc, ClientTarget).Name, "the first one otherwise")
	assert.Equal(t, "agents-burst2", ExtraPrefix("agents", "burst", 2))
}
