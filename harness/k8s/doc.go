// Package k8s renders Kubernetes manifests for running pdsoak in a cluster: a sharded
// harness run (a ConfigMap with the scenario, an Indexed Job of n shards writing to a
// shared volume, and a merge Job that waits for every shard's marker before it merges)
// and the reference PD topology (router, prefill and decode Deployments and Services).
//
// Rendering is pure: a scenario and options in, typed k8s.io/api objects out, serialised
// with sigs.k8s.io/yaml. Nothing here talks to a cluster.
//
//	objs, err := k8s.RenderRun(sc, content, k8s.RunOptions{Shards: 4, Image: img})
//	out, err := k8s.YAML(objs) // multi-document YAML for kubectl apply -f -
//
// Ordering: the shard Job and the merge Job are created together; the merge pod's
// initContainer (`harness k8s wait-shards`) blocks until every shard has written its
// marker file (MarkerPath) on the shared volume, bounded by the shard Job's deadline, so
// `harness merge` starts only after every shard finished.
package k8s
