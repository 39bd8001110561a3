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
