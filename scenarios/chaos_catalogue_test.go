package scenarios_test

import (
	"testing"

	"pdsoak/chaos"
	"pdsoak/scenarios"
)

// TestShippedScenariosAgainstChaos validates every embedded scenario against the real
// fault registry (types, target kinds and params), and checks that every registered
// fault type of the catalogue is exercised by at least one shipped scenario.
func TestShippedScenariosAgainstChaos(t *testing.T) {
	used := map[string]bool{}
	for _, info := range scenarios.List() {
		sc, err := scenarios.Load(info.Name, scenarios.WithFaultTypes(chaos.FaultTypes()))
		if err != nil {
			t.Errorf("%s: %v", info.Name, err)
			continue
		}
		for _, f := range sc.Faults {
			used[f.Type] = true
		}
	}
	for _, typ := range []string{
		"queue_saturation", "kv_transfer_stall", "kv_transfer_drop", "kv_transfer_corrupt",
		"bootstrap_stall", "prefill_crash", "decode_crash", "process_pause", "network_latency",
		"network_partition", "connection_reset", "bandwidth_limit", "kv_pool_exhaustion",
		"scheduler_stall", "client_disconnect",
	} {
		if _, ok := chaos.Lookup(typ); !ok {
			t.Errorf("catalogue type %s is not registered", typ)
		}
		if !used[typ] {
			t.Errorf("no shipped scenario uses %s", typ)
		}
	}
}
