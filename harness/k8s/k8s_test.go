package k8s_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"pdsoak/harness/k8s"
	"pdsoak/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// decoded is a rendered stream decoded strictly into the API types, by kind.
type decoded struct {
	configMaps  []*corev1.ConfigMap
	pvcs        []*corev1.PersistentVolumeClaim
	jobs        []*batchv1.Job
	deployments []*appsv1.Deployment
	services    []*corev1.Service
}

// decodeStrict decodes every document of a multi-document YAML stream into its
// k8s.io/api type; an unknown or duplicate field, or an unknown kind, is an error.
func decodeStrict(data []byte) (decoded, error) {
	var d decoded
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return d, fmt.Errorf("document %d: %w", i, err)
		}
		var err error
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/ConfigMap":
			o := new(corev1.ConfigMap)
			err = yaml.UnmarshalStrict(doc, o)
			d.configMaps = append(d.configMaps, o)
		case "v1/PersistentVolumeClaim":
			o := new(corev1.PersistentVolumeClaim)
			err = yaml.UnmarshalStrict(doc, o)
			d.pvcs = append(d.pvcs, o)
		case "batch/v1/Job":
			o := new(batchv1.Job)
			err = yaml.UnmarshalStrict(doc, o)
			d.jobs = append(d.jobs, o)
		case "apps/v1/Deployment":
			o := new(appsv1.Deployment)
			err = yaml.UnmarshalStrict(doc, o)
			d.deployments = append(d.deployments, o)
		case "v1/Service":
			o := new(corev1.Service)
			err = yaml.UnmarshalStrict(doc, o)
			d.services = append(d.services, o)
		default:
			err = fmt.Errorf("unexpected kind %s/%s", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			return d, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
	return d, nil
}

func TestDecodeStrictRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":       "apiVersion: batch/v1\nkind: Job\nspec:\n  parallelizm: 2\n",
		"unknown nested":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  nam: x\n",
		"duplicate field":     "apiVersion: v1\nkind: ConfigMap\ndata: {}\ndata: {}\n",
		"unknown kind":        "apiVersion: v1\nkind: Secret\n",
		"wrong type":          "apiVersion: batch/v1\nkind: Job\nspec:\n  parallelism: two\n",
		"unknown in template": "apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containerz: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeStrict([]byte(doc))
			require.Error(t, err)
		})
	}
}

func loadScenario(t testing.TB, name string, duration ...time.Duration) (*scenarios.Scenario, []byte) {
	t.Helper()
	content, ok := scenarios.Embedded(name)
	require.True(t, ok, name)
	sc, err := scenarios.Parse(name+".yaml", content, scenarios.WithOverrides(func(sc *scenarios.Scenario) {
		if len(duration) > 0 {
			sc.Duration = scenarios.Duration(duration[0])
		}
	}))
	require.NoError(t, err)
	return sc, content
}

// checkPod asserts the invariants every rendered pod holds.
func checkPod(t *testing.T, what string, spec corev1.PodSpec, labels map[string]string, component string) {
	t.Helper()
	assert.Equal(t, k8s.AppName, labels[k8s.LabelName], what)
	assert.Equal(t, k8s.AppName, labels[k8s.LabelPartOf], what)
	assert.Equal(t, component, labels[k8s.LabelComponent], what)
	for k, v := range labels {
		assert.Empty(t, validation.IsQualifiedName(k), what+" label key "+k)
		assert.Empty(t, validation.IsValidLabelValue(v), what+" label "+k+"="+v)
	}
	ps := spec.SecurityContext
	require.NotNil(t, ps, what)
	require.NotNil(t, ps.RunAsNonRoot, what)
	assert.True(t, *ps.RunAsNonRoot, what)
	require.NotNil(t, ps.RunAsUser, what)
	assert.NotZero(t, *ps.RunAsUser, what)
	require.NotNil(t, ps.SeccompProfile, what)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, ps.SeccompProfile.Type, what)
	assert.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC, what)
	require.NotNil(t, spec.AutomountServiceAccountToken, what)
	assert.False(t, *spec.AutomountServiceAccountToken, what)
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	require.NotEmpty(t, all, what)
	for _, c := range all {
		w := what + " container " + c.Name
		sc := c.SecurityContext
		require.NotNil(t, sc, w)
		require.NotNil(t, sc.Privileged, w)
		assert.False(t, *sc.Privileged, w)
		require.NotNil(t, sc.AllowPrivilegeEscalation, w)
		assert.False(t, *sc.AllowPrivilegeEscalation, w)
		require.NotNil(t, sc.ReadOnlyRootFilesystem, w)
		assert.True(t, *sc.ReadOnlyRootFilesystem, w)
		require.NotNil(t, sc.Capabilities, w)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, w)
		assert.Empty(t, sc.Capabilities.Add, w)
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, ok := c.Resources.Requests[r]
			require.True(t, ok, w+" request "+string(r))
			lim, ok := c.Resources.Limits[r]
			require.True(t, ok, w+" limit "+string(r))
			assert.Positive(t, req.Sign(), w)
			assert.GreaterOrEqual(t, lim.Cmp(req), 0, w+" limit >= request "+string(r))
		}
		// A read-only root filesystem needs a writable /tmp, and every mount a volume.
		vols := map[string]bool{}
		for _, v := range spec.Volumes {
			vols[v.Name] = true
		}
		for _, m := range c.VolumeMounts {
			assert.True(t, vols[m.Name], w+" mounts an undeclared volume "+m.Name)
		}
		assert.Contains(t, mountPaths(c), "/tmp", w)
	}
}

func mountPaths(c corev1.Container) []string {
	var ps []string
	for _, m := range c.VolumeMounts {
		ps = append(ps, m.MountPath)
	}
	return ps
}

func TestRenderRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scenario string
		shards   int
		duration time.Duration
		opts     func(*k8s.RunOptions)
	}{
		{name: "one shard", scenario: "smoke", shards: 1},
		{name: "two shards", scenario: "smoke", shards: 2},
		{name: "four shards, existing volume, target", scenario: "smoke", shards: 4, opts: func(o *k8s.RunOptions) {
			o.OutVolume, o.Target, o.Namespace = "shared-out", k8s.RouterURL("soak"), "soak"
		}},
		{name: "long soak, no retries", scenario: "nightly-soak", shards: 3, duration: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, content := loadScenario(t, tc.scenario)
			if tc.duration > 0 {
				sc, content = loadScenario(t, tc.scenario, tc.duration)
			}
			o := k8s.RunOptions{Shards: tc.shards, Image: "registry.example/pdsoak:v1"}
			if tc.opts != nil {
				tc.opts(&o)
			}
			objs, err := k8s.RenderRun(sc, content, o)
			require.NoError(t, err)
			out, err := k8s.YAML(objs)
			require.NoError(t, err)
			d, err := decodeStrict(out)
			require.NoError(t, err)

			require.Len(t, d.configMaps, 1)
			assert.Equal(t, string(content), d.configMaps[0].Data[k8s.ScenarioFile], "the ConfigMap carries the scenario file byte for byte")
			claim := o.OutVolume
			if o.OutVolume == "" {
				require.Len(t, d.pvcs, 1)
				assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, d.pvcs[0].Spec.AccessModes)
				claim = d.pvcs[0].Name
			} else {
				assert.Empty(t, d.pvcs, "an existing volume is not rendered")
			}
			require.Len(t, d.jobs, 2)
			shards, merge := d.jobs[0], d.jobs[1]
			b := k8s.BoundsOf(sc)
			n := int32(tc.shards)

			// The shard Job.
			js := shards.Spec
			require.NotNil(t, js.CompletionMode)
			assert.Equal(t, batchv1.IndexedCompletion, *js.CompletionMode)
			assert.Equal(t, n, *js.Completions)
			assert.Equal(t, n, *js.Parallelism)
			assert.Equal(t, b.Retries, *js.BackoffLimitPerIndex)
			assert.Equal(t, b.Retries*n, *js.BackoffLimit)
			assert.Greater(t, *js.ActiveDeadlineSeconds, int64(sc.Duration.Seconds()), "the deadline covers the scenario")
			assert.Equal(t, corev1.RestartPolicyNever, js.Template.Spec.RestartPolicy, "podFailurePolicy needs Never")
			checkPod(t, "shard", js.Template.Spec, js.Template.Labels, "shard")
			require.Len(t, js.Template.Spec.Containers, 1)
			c := js.Template.Spec.Containers[0]
			assert.Equal(t, o.Image, c.Image)
			assert.Equal(t, []string{k8s.HarnessBin}, c.Command)
			root := "/out/" + shards.Labels[k8s.LabelRunID]
			wantArgs := []string{"k8s", "shard", "--shards", fmt.Sprint(tc.shards), "--out-root", root, "--", "/scenario/scenario.yaml"}
			if o.Target != "" {
				wantArgs = append(wantArgs, "--target", o.Target)
			}
			assert.Equal(t, wantArgs, c.Args)
			assert.Subset(t, mountPaths(c), []string{"/scenario", "/out"})
			assertClaim(t, js.Template.Spec, claim)
			assertConfigMap(t, js.Template.Spec, d.configMaps[0].Name)

			// The merge Job: one pod, after every shard's marker.
			ms := merge.Spec
			assert.Nil(t, ms.CompletionMode)
			assert.Equal(t, int32(1), *ms.Completions)
			assert.Greater(t, *ms.ActiveDeadlineSeconds, *js.ActiveDeadlineSeconds, "the merge outlives the shards' deadline")
			checkPod(t, "merge", ms.Template.Spec, ms.Template.Labels, "merge")
			require.Len(t, ms.Template.Spec.InitContainers, 1)
			w := ms.Template.Spec.InitContainers[0]
			assert.Equal(t, []string{"k8s", "wait-shards", "--out-root", root, "--shards", fmt.Sprint(tc.shards), "--timeout", b.ShardDeadline.String()}, w.Args)
			require.Len(t, ms.Template.Spec.Containers, 1)
			mergeArgs := []string{"merge"}
			for i := 1; i <= tc.shards; i++ {
				mergeArgs = append(mergeArgs, fmt.Sprintf("%s/shard-%d", root, i))
			}
			assert.Equal(t, append(mergeArgs, "--out", root+"/merged"), ms.Template.Spec.Containers[0].Args)
			assertClaim(t, ms.Template.Spec, claim)

			// Names and the run id label are shared and valid.
			run := shards.Labels[k8s.LabelRunID]
			require.NotEmpty(t, run)
			for _, meta := range []struct{ name, ns, run string }{
				{d.configMaps[0].Name, d.configMaps[0].Namespace, d.configMaps[0].Labels[k8s.LabelRunID]},
				{shards.Name, shards.Namespace, shards.Labels[k8s.LabelRunID]},
				{merge.Name, merge.Namespace, merge.Labels[k8s.LabelRunID]},
			} {
				assert.Empty(t, validation.IsDNS1123Label(meta.name), meta.name)
				assert.Equal(t, o.Namespace, meta.ns)
				assert.Equal(t, run, meta.run)
			}
		})
	}
}

func assertClaim(t *testing.T, spec corev1.PodSpec, claim string) {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			assert.Equal(t, claim, v.PersistentVolumeClaim.ClaimName)
			return
		}
	}
	t.Errorf("no PVC volume (want %s)", claim)
}

func assertConfigMap(t *testing.T, spec corev1.PodSpec, name string) {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			assert.Equal(t, name, v.ConfigMap.Name)
			return
		}
	}
	t.Errorf("no ConfigMap volume (want %s)", name)
}

func TestBoundsOf(t *testing.T) {
	short, _ := loadScenario(t, "smoke")
	long, _ := loadScenario(t, "nightly-soak", 2*time.Hour)
	bs, bl := k8s.BoundsOf(short), k8s.BoundsOf(long)
	assert.Equal(t, int32(1), bs.Retries, "a short scenario is retried once")
	assert.Equal(t, int32(0), bl.Retries, "a soak beyond %s is not", k8s.RetryUpTo)
	assert.Equal(t, 2*bs.Attempt, bs.ShardDeadline)
	assert.Equal(t, bl.Attempt, bl.ShardDeadline)
	assert.Greater(t, bs.Attempt, short.Duration.D()+short.Drain.Timeout.D())
	assert.Greater(t, bl.MergeDeadline, bl.ShardDeadline)
	assert.Greater(t, bl.Attempt, bs.Attempt)
}

func TestRenderRunErrors(t *testing.T) {
	sc, content := loadScenario(t, "smoke")
	for _, tc := range []struct {
		name string
		o    k8s.RunOptions
		want string
	}{
		{"no shards", k8s.RunOptions{Image: "i"}, "--shards"},
		{"too many shards", k8s.RunOptions{Shards: 1001, Image: "i"}, "--shards"},
		{"no image", k8s.RunOptions{Shards: 1}, "--image"},
		{"bad cpu", k8s.RunOptions{Shards: 1, Image: "i", Shard: k8s.Resources{CPU: "lots"}}, "--cpu"},
		{"zero memory", k8s.RunOptions{Shards: 1, Image: "i", Shard: k8s.Resources{Memory: "0"}}, "must be > 0"},
		{"bad merge memory", k8s.RunOptions{Shards: 1, Image: "i", Merge: k8s.Resources{Memory: "1Gigs"}}, "--merge-memory"},
		{"bad storage", k8s.RunOptions{Shards: 1, Image: "i", StorageSize: "big"}, "--storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k8s.RenderRun(sc, content, tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "k8s: "), err.Error())
		})
	}
}

func TestRenderReference(t *testing.T) {
	for _, tc := range []struct {
		name            string
		prefill, decode int
		semantics, ns   string
	}{
		{name: "1P1D", prefill: 1, decode: 1},
		{name: "2P3D sglang", prefill: 2, decode: 3, semantics: "sglang", ns: "pd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := k8s.RenderReference(k8s.ReferenceOptions{Prefill: tc.prefill, Decode: tc.decode, Image: "pdsoak:dev",
				Semantics: tc.semantics, Namespace: tc.ns})
			require.NoError(t, err)
			out, err := k8s.YAML(objs)
			require.NoError(t, err)
			d, err := decodeStrict(out)
			require.NoError(t, err)
			want := tc.prefill + tc.decode + 1
			require.Len(t, d.deployments, want)
			require.Len(t, d.services, want)

			deps := map[string]*appsv1.Deployment{}
			for _, dep := range d.deployments {
				deps[dep.Name] = dep
				assert.Equal(t, int32(1), *dep.Spec.Replicas, dep.Name)
				assert.Equal(t, tc.ns, dep.Namespace)
				sel := dep.Spec.Selector.MatchLabels
				for k, v := range sel {
					assert.Equal(t, v, dep.Spec.Template.Labels[k], "%s: the selector matches the pods", dep.Name)
				}
				checkPod(t, dep.Name, dep.Spec.Template.Spec, dep.Spec.Template.Labels, dep.Labels[k8s.LabelComponent])
				c := dep.Spec.Template.Spec.Containers[0]
				assert.Equal(t, []string{k8s.PDServerBin}, c.Command)
				ports := map[string]bool{}
				for _, p := range c.Ports {
					ports[p.Name] = true
				}
				for what, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
					require.NotNil(t, p, dep.Name+" "+what)
					require.NotNil(t, p.HTTPGet, dep.Name+" "+what)
					want := "/health"
					if what == "liveness" && dep.Labels[k8s.LabelComponent] == "router" {
						want = "/liveness" // workers down for minutes must not restart the router
					}
					assert.Equal(t, want, p.HTTPGet.Path, dep.Name+" "+what)
					assert.True(t, ports[p.HTTPGet.Port.StrVal], "%s %s probes a declared port", dep.Name, what)
				}
				assert.Subset(t, c.Args, []string{"--host", "0.0.0.0"}, "listens beyond loopback")
				if tc.semantics != "" {
					assert.Contains(t, strings.Join(c.Args, " "), "--semantics "+tc.semantics, dep.Name)
				}
			}
			for _, svc := range d.services {
				dep := deps[svc.Name]
				require.NotNil(t, dep, "service %s has a deployment", svc.Name)
				assert.Empty(t, validation.IsDNS1035Label(svc.Name))
				for k, v := range svc.Spec.Selector {
					assert.Equal(t, v, dep.Spec.Template.Labels[k], "%s selects its pod", svc.Name)
				}
				names := map[string]bool{}
				for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
					names[p.Name] = true
				}
				for _, p := range svc.Spec.Ports {
					assert.True(t, names[p.TargetPort.StrVal], "%s targets a container port", svc.Name)
				}
				if strings.Contains(svc.Name, "prefill") {
					assert.Equal(t, []int32{k8s.HTTPPort, k8s.BootstrapPort}, []int32{svc.Spec.Ports[0].Port, svc.Spec.Ports[1].Port}, "prefill exposes its bootstrap port")
				}
			}
			router := deps[k8s.RouterService]
			require.NotNil(t, router)
			args := strings.Join(router.Spec.Template.Spec.Containers[0].Args, " ")
			assert.True(t, strings.HasPrefix(args, "router "), args)
			for i := 0; i < tc.prefill; i++ {
				assert.Contains(t, args, fmt.Sprintf("--prefill http://pdsoak-prefill-%d:30000 --prefill-bootstrap pdsoak-prefill-%d:8998", i, i))
				assert.Contains(t, strings.Join(deps[fmt.Sprintf("pdsoak-prefill-%d", i)].Spec.Template.Spec.Containers[0].Args, " "), "--disaggregation-bootstrap-port 8998")
			}
			for i := 0; i < tc.decode; i++ {
				assert.Contains(t, args, fmt.Sprintf("--decode http://pdsoak-decode-%d:30000", i))
			}
		})
	}
}

func TestRenderReferenceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    k8s.ReferenceOptions
		want string
	}{
		{"no prefill", k8s.ReferenceOptions{Decode: 1, Image: "i"}, "--prefill"},
		{"no image", k8s.ReferenceOptions{Prefill: 1, Decode: 1}, "--image"},
		{"bad semantics", k8s.ReferenceOptions{Prefill: 1, Decode: 1, Image: "i", Semantics: "loose"}, "--semantics"},
		{"bad worker cpu", k8s.ReferenceOptions{Prefill: 1, Decode: 1, Image: "i", Worker: k8s.Resources{CPU: "-1"}}, "must be > 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k8s.RenderReference(tc.o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRouterURL(t *testing.T) {
	assert.Equal(t, "http://pdsoak-router:30000", k8s.RouterURL(""))
	assert.Equal(t, "http://pdsoak-router.soak.svc:30000", k8s.RouterURL("soak"))
}

// TestGolden pins the rendered output (go test ./harness/k8s -run Golden -update).
func TestGolden(t *testing.T) {
	sc, content := loadScenario(t, "smoke")
	run, err := k8s.RenderRun(sc, content, k8s.RunOptions{Shards: 4, Image: "pdsoak:dev", Namespace: "soak", RunID: "smoke-f9396370"})
	require.NoError(t, err)
	ref, err := k8s.RenderReference(k8s.ReferenceOptions{Prefill: 1, Decode: 1, Image: "pdsoak:dev", Namespace: "soak"})
	require.NoError(t, err)
	for file, objs := range map[string][]runtime.Object{"render-smoke-4.yaml": run, "render-reference-1p1d.yaml": ref} {
		got, err := k8s.YAML(objs)
		require.NoError(t, err)
		path := filepath.Join("testdata", file)
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(path, got, 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run with -update to create it")
		assert.Equal(t, string(want), string(got), file)
		_, err = decodeStrict(want)
		require.NoError(t, err, "the golden file decodes strictly")
	}
}

// FuzzRunNames: whatever the scenario name or --run-id, the rendered names and labels are
// valid and the output decodes strictly.
func FuzzRunNames(f *testing.F) {
	sc, content := loadScenario(f, "smoke")
	for _, s := range []string{"", "smoke", "A very Long Scenario_Name!! with ünïcode and more than sixty-three characters in it", "---", "9", "x-"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, name, runID string) {
		s := *sc
		s.Name = name
		objs, err := k8s.RenderRun(&s, content, k8s.RunOptions{Shards: 2, Image: "pdsoak:dev", RunID: runID})
		require.NoError(t, err)
		out, err := k8s.YAML(objs)
		require.NoError(t, err)
		d, err := decodeStrict(out)
		require.NoError(t, err)
		for _, j := range d.jobs {
			require.Empty(t, validation.IsDNS1123Label(j.Name), j.Name)
			for k, v := range j.Spec.Template.Labels {
				require.Empty(t, validation.IsValidLabelValue(v), k+"="+v)
			}
		}
		require.Empty(t, validation.IsDNS1123Subdomain(d.configMaps[0].Name))
		require.Empty(t, validation.IsDNS1123Subdomain(d.pvcs[0].Name))
	})
}

// Every render is a run of its own: a nightly renders the same inputs every night, and
// when the names were a hash of the inputs the second night's `kubectl apply` met the first
// night's finished Jobs ("unchanged"), ran nothing, and `kubectl wait` reported the old
// verdict. --run-id still chooses the names.
func TestEveryRenderIsANewRun(t *testing.T) {
	sc, content := loadScenario(t, "smoke")
	o := k8s.RunOptions{Shards: 2, Image: "pdsoak:dev", OutVolume: "kept"}
	ids := map[string]bool{}
	for range 3 {
		objs, err := k8s.RenderRun(sc, content, o)
		require.NoError(t, err)
		run := objs[0].(*corev1.ConfigMap).Labels[k8s.LabelRunID]
		assert.Regexp(t, `^smoke-\d{10}-[a-z2-7]{4}$`, run)
		for _, obj := range objs {
			if j, ok := obj.(*batchv1.Job); ok {
				assert.Contains(t, j.Name, run, "the Jobs are named after the run")
			}
		}
		ids[run] = true
	}
	assert.Len(t, ids, 3, "three renders of the same inputs, three runs")

	o.RunID = "nightly-1203"
	objs, err := k8s.RenderRun(sc, content, o)
	require.NoError(t, err)
	assert.Equal(t, "nightly-1203", objs[0].(*corev1.ConfigMap).Labels[k8s.LabelRunID], "--run-id is kept")

	at := time.Date(2026, 12, 3, 22, 41, 0, 0, time.FixedZone("CET", 3600))
	id := k8s.NewRunID("A Very Long Scenario Name That Goes On And On", at)
	assert.Regexp(t, `^a-very-long-scenario-nam-2612032141-[a-z2-7]{4}$`, id, "the name cut to 24, the time in UTC")
	assert.LessOrEqual(t, len(id), 40)
}

// Two runs on one existing claim (--out-volume: a bucket or share kept across runs): each
// run's shards, markers and merge live in a directory of their own. On shared paths the
// second run's merge found the first run's markers at once and merged the first run's
// shard directories (or a mix, while its own shards rewrote them): the old verdict
// reported as the new run's.
func TestRunsSharingAClaimUseTheirOwnPaths(t *testing.T) {
	roots := map[string]string{} // run id -> its paths, joined
	for _, name := range []string{"smoke", "nightly-soak"} {
		sc, content := loadScenario(t, name)
		objs, err := k8s.RenderRun(sc, content, k8s.RunOptions{Shards: 2, Image: "i", OutVolume: "shared-out"})
		require.NoError(t, err)
		var paths []string
		for _, o := range objs {
			j, ok := o.(*batchv1.Job)
			if !ok {
				continue
			}
			for _, c := range append(j.Spec.Template.Spec.InitContainers, j.Spec.Template.Spec.Containers...) {
				for i, a := range c.Args {
					if a == "--out-root" || a == "--out" {
						paths = append(paths, c.Args[i+1])
					}
					if strings.HasPrefix(a, k8s.OutDir+"/") {
						paths = append(paths, a)
					}
				}
			}
		}
		require.NotEmpty(t, paths)
		run := objs[0].(*corev1.ConfigMap).Labels[k8s.LabelRunID]
		for _, p := range paths {
			root := k8s.RunRoot(run)
			assert.True(t, p == root || strings.HasPrefix(p, root+"/"), "%s: %s is not under the run's own directory %s", name, p, root)
		}
		roots[run] = strings.Join(paths, " ")
	}
	assert.Len(t, roots, 2, "two runs, two run ids")
}
