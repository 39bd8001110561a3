package cli

import (
	"strings"

	"pdsoak/harness/k8s"
	"pdsoak/scenarios"
)

// refuseTargetFaults refuses k8s render --target for a scenario whose faults need the
// processes or links the harness would have started, with the reason and the
// alternatives (k8s.TargetFaultProblems), before the override turns them into "does not
// exist in this topology". A scenario that does not load as written is left to the
// normal load's problems.
func (a *app) refuseTargetFaults(arg, target string) error {
	if target == "" {
		return nil
	}
	sc, err := scenarios.Load(arg, scenarios.WithFaultTypes(a.faultTypes))
	if err != nil {
		return nil
	}
	if ps := k8s.TargetFaultProblems(sc, a.faultTypes, target); len(ps) > 0 {
		return usageError("k8s render: %s", strings.Join(ps, "\nharness: k8s render: "))
	}
	return nil
}
