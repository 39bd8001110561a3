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
