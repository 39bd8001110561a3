package scenarios_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		if !assert.NoError(t, err, info.Name) {
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
		_, ok := chaos.Lookup(typ)
		assert.True(t, ok, "catalogue type %s is not registered", typ)
		assert.True(t, used[typ], "no shipped scenario uses %s", typ)
	}
}

// The injections of a repeated timeline (kill, kill#2, ...) are plain faults to chaos:
// a two-hour nightly-soak builds a chaos timeline without any change there.
func TestRepeatedTimelineAgainstChaos(t *testing.T) {
	sc, err := scenarios.Load("nightly-soak", scenarios.WithFaultTypes(chaos.FaultTypes()),
		scenarios.WithOverrides(func(sc *scenarios.Scenario) { sc.Duration = scenarios.Duration(2 * time.Hour) }))
	require.NoError(t, err)
	require.Greater(t, len(sc.Faults), 15)
	_, err = chaos.NewTimeline(sc.Faults)
	require.NoError(t, err)
}
