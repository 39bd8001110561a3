package e2e

import (
	"strings"
	"testing"

	"pdsoak/chaos"
	"pdsoak/scenarios"
)

// caseTypes parses every case's scenario strictly, with the chaos registry, and returns
// which cases apply each fault type.
func caseTypes(t *testing.T) map[string][]string {
	t.Helper()
	covered := map[string][]string{}
	for _, c := range cases {
		sc, err := scenarios.Parse(c.name+".yaml", []byte(c.yaml()), scenarios.WithFaultTypes(chaos.FaultTypes()))
		if err != nil {
			t.Fatalf("case %q: its scenario does not validate: %v\n%s", c.name, err, c.yaml())
		}
		if len(sc.Faults) == 0 {
			t.Errorf("case %q applies no fault", c.name)
		}
		for _, f := range sc.Faults {
			covered[f.Type] = append(covered[f.Type], c.name)
		}
	}
	return covered
}

// TestCatalogueCovered fails when chaos registers a fault type that no end-to-end case
// applies to the reference server, so a new fault type cannot ship untested.
func TestCatalogueCovered(t *testing.T) {
	covered := caseTypes(t)
	types := chaos.Types()
	if len(types) == 0 {
		t.Fatal("chaos registers no fault types")
	}
	for _, typ := range types {
		t.Run(typ.Name, func(t *testing.T) {
			if len(covered[typ.Name]) == 0 {
				t.Errorf("fault type %s has no case in harness/e2e (add one to cases in e2e_test.go)", typ.Name)
			}
		})
	}
}

// TestIssueCatalogue pins the catalogue issue 5 requires: each of these types must stay
// registered (and so, by TestCatalogueCovered, tested end to end).
func TestIssueCatalogue(t *testing.T) {
	required := []string{"queue_saturation", "kv_transfer_stall", "kv_transfer_drop", "kv_transfer_corrupt",
		"bootstrap_stall", "prefill_crash", "decode_crash", "process_pause", "network_latency",
		"network_partition", "connection_reset", "bandwidth_limit", "kv_pool_exhaustion",
		"scheduler_stall", "client_disconnect"}
	for _, name := range required {
		t.Run(name, func(t *testing.T) {
			if _, ok := chaos.Lookup(name); !ok {
				t.Errorf("chaos does not register %s", name)
			}
		})
	}
}

// TestCaseNamesUnique keeps subtest names and scenario file names distinct.
func TestCaseNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cases {
		k := strings.ReplaceAll(c.name, " ", "-")
		if seen[k] {
			t.Errorf("duplicate case name %q", c.name)
		}
		seen[k] = true
	}
}
