package k8s

import (
	"fmt"

	"pdsoak/scenarios"
)

// Warnings are what a cluster user must know about a rendered run before applying it; the
// CLI prints them on stderr (the manifests go to stdout). Pure: the scenario as loaded
// (with --target applied) and the options.
func Warnings(sc *scenarios.Scenario, o RunOptions) []string {
	var out []string
	if sc.Embedded() && o.Shards > 1 {
		msg := fmt.Sprintf("k8s: no --target: each of the %d shards starts its own embedded reference server, so the shards load %d separate targets", o.Shards, o.Shards)
		if len(sc.Faults) > 0 {
			msg += ", and the faults (applied by shard 1 only) reach only shard 1's server"
		}
		out = append(out, msg+"; give every shard one target: harness k8s render-reference, then --target "+RouterURL("NS"))
	}
	if o.OutVolume == "" {
		class := "the cluster's default storage class"
		if o.StorageClass != "" {
			class = "storage class " + o.StorageClass
		}
		out = append(out, fmt.Sprintf("k8s: the output PVC asks %s for ReadWriteMany (shards and the merge share it): pick one that provides it (--storage-class: NFS, CephFS, EFS, Filestore); on NFS the kubelet does not apply fsGroup %d, so export the share writable by uid %d (or pass an existing claim with --out-volume)", class, NonRootUID, NonRootUID))
	}
	return out
}

// TargetFaultProblems lists the faults of sc (loaded as written, before --target) that
// cannot act once every shard drives an endpoint it did not start: a process fault
// (signal, restart, failpoint) needs the process under the harness's supervisor, and a
// link fault its fault proxy; neither exists behind --target. Each line gives the fault,
// the reason and the alternative. Workload faults (client_disconnect, kv_pool_exhaustion
// on a workload) act from the shard and stay.
func TargetFaultProblems(sc *scenarios.Scenario, types map[string]scenarios.FaultType, target string) []string {
	var out []string
	for _, f := range sc.Faults {
		ft := types[f.Type]
		kind, ok := sc.Topology().Resolve(f.Target)
		if !ok || kind == scenarios.TargetWorkload || (ft.Targets != 0 && ft.Targets&(scenarios.TargetProcess|scenarios.TargetLink) == 0) {
			continue
		}
		what := "acts on a process the harness starts and supervises (signals, restarts, failpoints through its admin API)"
		if kind == scenarios.TargetLink {
			what = "acts through the fault proxy the harness puts on a link it starts"
		}
		out = append(out, fmt.Sprintf("fault %s (%s on %s) %s; with --target %s every shard drives an endpoint it did not start, so the fault cannot reach it. Alternatives: render without --target (each shard's embedded server; shard 1 applies the faults to its own), run the scenario unsharded (one pod, harness run) so its faults act on the processes it launches, or keep only workload faults", f.Name, f.Type, f.Target, what, target))
	}
	return out
}
