package k8s

import (
	"crypto/rand"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pdsoak/scenarios"
)

// Paths inside the harness containers.
const (
	ScenarioDir  = "/scenario"
	ScenarioFile = "scenario.yaml"
	OutDir       = "/out"
	// HarnessBin is the harness binary in the image (Dockerfile).
	HarnessBin = "/usr/local/bin/harness"
)

// Defaults of RunOptions.
const (
	DefaultCPU         = "1"
	DefaultMemory      = "1Gi"
	DefaultStorage     = "1Gi"
	DefaultMergeCPU    = "500m"
	DefaultMergeMemory = "1Gi"
	// RetryUpTo is the longest scenario whose shards are retried once after an
	// infrastructure failure; a longer soak is not, since a retry would double its time.
	RetryUpTo = 30 * time.Minute
	// slack covers pod scheduling, image start and report writing on top of a run's bound.
	slack = 5 * time.Minute
	// mergeBound is the time harness merge is given once every shard is done.
	mergeBound = 10 * time.Minute
)

// RunOptions configure RenderRun.
type RunOptions struct {
	Shards    int
	Image     string
	Namespace string // empty: the namespace kubectl applies to
	// OutVolume names an existing PersistentVolumeClaim (ReadWriteMany) that every shard
	// and the merge mount at /out; empty renders one (StorageSize, StorageClass).
	OutVolume    string
	StorageSize  string
	StorageClass string
	// Target is passed to every shard as --target (e.g. the router Service of
	// render-reference); empty keeps the scenario's target.
	Target string
	// MetricsURL is passed to every shard as --metrics-url (the target's Prometheus
	// endpoint, e.g. the router Service's /metrics), for no_leaks against a --target.
	MetricsURL string
	// RunID names and labels this run's objects; empty is a fresh one (NewRunID), so
	// every render is a run of its own.
	RunID string
	Shard Resources
	Merge Resources
}

// RunRoot is a run's directory on the shared volume: the claim may be kept across runs
// (--out-volume), and a merge that found another run's markers there would merge that
// run's shards and report its verdict.
func RunRoot(runID string) string { return path.Join(OutDir, runID) }

// MarkerPath is the file shard i (1-based) writes on the shared volume once its run
// ended with a verdict (pass or fail); the merge Job waits for all of them.
func MarkerPath(root string, i int) string { return path.Join(root, fmt.Sprintf("shard-%d.done", i)) }

// ShardDir is shard i's output directory (harness run --out).
func ShardDir(root string, i int) string { return path.Join(root, fmt.Sprintf("shard-%d", i)) }

// MergedDir is the merge's output directory.
func MergedDir(root string) string { return path.Join(root, "merged") }

// Bounds are the time limits derived from a scenario.
type Bounds struct {
	Attempt       time.Duration // one shard's run: start + duration + deadlines + drain + slack
	Retries       int32         // per shard (backoffLimitPerIndex)
	ShardDeadline time.Duration // the shard Job's activeDeadlineSeconds
	MergeDeadline time.Duration // the merge Job's (it starts with the shard Job and waits)
}

// BoundsOf derives the Jobs' limits from the scenario's duration and bounds.
func BoundsOf(sc *scenarios.Scenario) Bounds {
	start := time.Duration(0)
	if sc.Target.URL == "" && len(sc.Target.Launch) == 0 {
		start = sc.Reference.StartTimeout.D()
	}
	for _, l := range sc.Target.Launch {
		start = max(start, l.StartTimeout.D())
	}
	attempt := start + sc.Duration.D() + sc.Deadlines.Total.D() + sc.Drain.Timeout.D() + sc.Drain.LeakTimeout.D() + slack
	var b Bounds
	b.Attempt = attempt
	if sc.Duration.D() <= RetryUpTo {
		b.Retries = 1
	}
	b.ShardDeadline = time.Duration(b.Retries+1) * attempt
	b.MergeDeadline = b.ShardDeadline + mergeBound
	return b
}

func seconds(d time.Duration) *int64 { return ptr(int64(math.Ceil(d.Seconds()))) }

// NewRunID is a fresh run id for a scenario named name: the name, the time of the
// render (UTC, to the minute) and four random characters. Why fresh and not a hash of the
// inputs: a nightly renders the same inputs every night, and with the same names the second
// night's `kubectl apply` answered "unchanged" to the first night's finished Jobs (kept a
// week, TTLSecondsAfterFinished), ran nothing, and `kubectl wait` and the merge's logs
// reported the old night's verdict as the new one's. --run-id chooses one (to render a
// run's manifests again).
func NewRunID(name string, now time.Time) string {
	return dnsLabel(name, 24) + "-" + now.UTC().Format("0601021504") + "-" + strings.ToLower(rand.Text()[:4])
}

// RenderRun renders a sharded run of sc: the scenario ConfigMap, the output PVC (unless
// o.OutVolume names one), the Indexed shard Job and the merge Job. content is the
// scenario file as the harness will read it.
func RenderRun(sc *scenarios.Scenario, content []byte, o RunOptions) ([]runtime.Object, error) {
	if o.Shards < 1 || o.Shards > 1000 {
		return nil, fmt.Errorf("k8s: --shards must be in [1, 1000] (got %d)", o.Shards)
	}
	if o.Image == "" {
		return nil, fmt.Errorf("k8s: --image is required (the pdsoak image: make image)")
	}
	if o.Shard.CPU == "" {
		o.Shard.CPU = DefaultCPU
	}
	if o.Shard.Memory == "" {
		o.Shard.Memory = DefaultMemory
	}
	if o.Merge.CPU == "" {
		o.Merge.CPU = DefaultMergeCPU
	}
	if o.Merge.Memory == "" {
		o.Merge.Memory = DefaultMergeMemory
	}
	if o.StorageSize == "" {
		o.StorageSize = DefaultStorage
	}
	shardRes, err := o.Shard.requirements("")
	if err != nil {
		return nil, err
	}
	mergeRes, err := o.Merge.requirements("merge-")
	if err != nil {
		return nil, err
	}
	storage, err := resource.ParseQuantity(o.StorageSize)
	if err != nil {
		return nil, fmt.Errorf("k8s: --storage %q: %w", o.StorageSize, err)
	}
	if o.RunID == "" {
		o.RunID = NewRunID(sc.Name, time.Now())
	}
	runID := dnsLabel(o.RunID, 40) // "pdsoak-"+runID+"-shards" stays a 63-character label (the pods carry the Job name as a label)
	base := "pdsoak-" + runID
	root := RunRoot(runID)
	labels := func(component string) map[string]string {
		return map[string]string{LabelName: AppName, LabelPartOf: AppName, LabelComponent: component,
			LabelInstance: base, LabelManagedBy: "harness-k8s-render", LabelRunID: runID}
	}
	meta := func(name, component string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels(component),
			Annotations: map[string]string{"pdsoak.dev/scenario": sc.Name}}
	}
	b := BoundsOf(sc)
	n := int32(o.Shards)

	var objs []runtime.Object
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(base+"-scenario", "scenario"),
		Data:       map[string]string{ScenarioFile: string(content)},
	}
	objs = append(objs, cm)

	claim := o.OutVolume
	if claim == "" {
		claim = base + "-out"
		pvc := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: meta(claim, "output"),
			Spec: corev1.PersistentVolumeClaimSpec{
				// Every shard pod, on any node, writes to it at once.
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storage}},
			},
		}
		if o.StorageClass != "" {
			pvc.Spec.StorageClassName = ptr(o.StorageClass)
		}
		objs = append(objs, pvc)
	}

	tmpVol, tmpMount := tmpVolume()
	volumes := []corev1.Volume{
		{Name: "scenario", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
		{Name: "out", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
		tmpVol,
	}
	mounts := []corev1.VolumeMount{
		{Name: "scenario", MountPath: ScenarioDir, ReadOnly: true},
		{Name: "out", MountPath: OutDir},
		tmpMount,
	}
	env := []corev1.EnvVar{{Name: "TMPDIR", Value: "/tmp"}, {Name: "HOME", Value: "/tmp"}}

	// The image has no shell, so `harness k8s shard` does what
	//   harness run /scenario/scenario.yaml --shard $((JOB_COMPLETION_INDEX+1))/N --out /out/RUN/shard-$((JOB_COMPLETION_INDEX+1))
	// would, and writes the shard's marker.
	shardArgs := []string{"k8s", "shard", "--shards", strconv.Itoa(o.Shards), "--out-root", root, "--",
		path.Join(ScenarioDir, ScenarioFile)}
	if o.Target != "" {
		shardArgs = append(shardArgs, "--target", o.Target)
	}
	if o.MetricsURL != "" {
		shardArgs = append(shardArgs, "--metrics-url", o.MetricsURL)
	}
	shards := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(base+"-shards", "shard"),
		Spec: batchv1.JobSpec{
			CompletionMode:        ptr(batchv1.IndexedCompletion),
			Completions:           ptr(n),
			Parallelism:           ptr(n),
			BackoffLimitPerIndex:  ptr(b.Retries),
			BackoffLimit:          ptr(b.Retries * n),
			ActiveDeadlineSeconds: seconds(b.ShardDeadline),
			// A replacement starts only once the failed pod is gone, so two attempts of one
			// shard never write its directory at once.
			PodReplacementPolicy: ptr(batchv1.Failed),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				// Exit 2 is a bad scenario or command line: no retry can fix it.
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr("harness"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{2}}},
				// An evicted or preempted pod is not the shard's fault.
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			}},
			TTLSecondsAfterFinished: ptr(int32(7 * 24 * 3600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("shard")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSecurity(),
					Volumes:                      volumes,
					Containers: []corev1.Container{{
						Name: "harness", Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{HarnessBin}, Args: shardArgs,
						Env: env, Resources: shardRes, VolumeMounts: mounts,
						SecurityContext: containerSecurity(),
					}},
				},
			},
		},
	}
	objs = append(objs, shards)

	mergeArgs := []string{"merge"}
	for i := 1; i <= o.Shards; i++ {
		mergeArgs = append(mergeArgs, ShardDir(root, i))
	}
	mergeArgs = append(mergeArgs, "--out", MergedDir(root))
	waitRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	merge := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(base+"-merge", "merge"),
		Spec: batchv1.JobSpec{
			Completions:           ptr(int32(1)),
			Parallelism:           ptr(int32(1)),
			BackoffLimit:          ptr(int32(1)),
			ActiveDeadlineSeconds: seconds(b.MergeDeadline),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				// 1 is the merged verdict FAIL and 2 a bad command line: final, not retried.
				// 3 (an invalid run or an infrastructure failure) is retried once.
				{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr("merge"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1, 2}}},
				{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
					{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			}},
			TTLSecondsAfterFinished: ptr(int32(7 * 24 * 3600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("merge")},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              podSecurity(),
					Volumes:                      volumes,
					// The ordering: this waits for every shard's marker, bounded by the
					// shard Job's deadline, before the merge container starts.
					InitContainers: []corev1.Container{{
						Name: "wait-shards", Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{HarnessBin},
						Args: []string{"k8s", "wait-shards", "--out-root", root, "--shards", strconv.Itoa(o.Shards),
							"--timeout", b.ShardDeadline.String()},
						Resources: waitRes, VolumeMounts: mounts, SecurityContext: containerSecurity(),
					}},
					Containers: []corev1.Container{{
						Name: "merge", Image: o.Image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{HarnessBin}, Args: mergeArgs,
						Env: env, Resources: mergeRes, VolumeMounts: mounts,
						SecurityContext: containerSecurity(),
					}},
				},
			},
		},
	}
	objs = append(objs, merge)
	return objs, nil
}
