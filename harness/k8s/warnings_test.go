package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/scenarios"
)

func TestWarnings(t *testing.T) {
	embedded := &scenarios.Scenario{Name: "s", Faults: []scenarios.Fault{{Name: "k", Type: "process_kill", Target: "decode"}}}
	external := &scenarios.Scenario{Name: "s", Target: scenarios.Target{URL: RouterURL("ns")}}
	for _, tc := range []struct {
		name     string
		sc       *scenarios.Scenario
		o        RunOptions
		contains []string
		n        int
	}{
		{"embedded, sharded, faults", embedded, RunOptions{Shards: 4}, []string{"each of the 4 shards starts its own embedded reference server", "reach only shard 1's server", "--target", "ReadWriteMany", "fsGroup 65532"}, 2},
		{"one shard: no sharding warning", embedded, RunOptions{Shards: 1, OutVolume: "pvc"}, nil, 0},
		{"external target, storage class named", external, RunOptions{Shards: 4, StorageClass: "nfs-client"}, []string{"storage class nfs-client"}, 1},
		{"existing claim: no PVC note", external, RunOptions{Shards: 4, OutVolume: "shared"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := Warnings(tc.sc, tc.o)
			assert.Len(t, ws, tc.n)
			all := ""
			for _, w := range ws {
				all += w + "\n"
			}
			for _, c := range tc.contains {
				assert.Contains(t, all, c)
			}
		})
	}
}

func TestTargetFaultProblems(t *testing.T) {
	types := map[string]scenarios.FaultType{
		"process_kill": {Targets: scenarios.TargetProcess}, "network_partition": {Targets: scenarios.TargetLink},
		"client_disconnect": {Targets: scenarios.TargetWorkload},
	}
	sc, err := scenarios.Parse("t.yaml", []byte(`name: t
duration: 30s
workloads: [{name: agents, type: agents, agents: 2, turns: 1}]
faults:
  - {name: kill, type: process_kill, target: decode, at: 5s, for: 2s}
  - {name: cut, type: network_partition, target: router->decode, at: 10s, for: 2s}
  - {name: hangup, type: client_disconnect, target: client, at: 15s, for: 2s}
`), scenarios.WithFaultTypes(types))
	if err != nil {
		t.Fatal(err)
	}
	ps := TargetFaultProblems(sc, types, "http://r:30000")
	if assert.Len(t, ps, 2) {
		assert.Contains(t, ps[0], "fault kill (process_kill on decode) acts on a process the harness starts")
		assert.Contains(t, ps[0], "Alternatives: render without --target")
		assert.Contains(t, ps[1], "fault cut (network_partition on router->decode) acts through the fault proxy")
	}
}
