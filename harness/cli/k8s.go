package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"pdsoak/harness/k8s"
	"pdsoak/scenarios"
)

// k8sCommand is `harness k8s`: manifests for running pdsoak in a Kubernetes cluster, and
// the two helpers its pods run (the image has no shell).
func (a *app) k8sCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Render Kubernetes manifests: a sharded run (render) and the reference PD topology (render-reference)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return &ExitError{Code: ExitUsage}
		},
	}
	cmd.AddCommand(a.k8sRenderCommand(), a.k8sRenderReferenceCommand(), a.k8sShardCommand(), a.k8sWaitShardsCommand())
	return cmd
}

func (a *app) k8sRenderCommand() *cobra.Command {
	var o k8s.RunOptions
	var outPath string
	cmd := &cobra.Command{
		Use:   "render SCENARIO --shards N --image IMAGE",
		Short: "Print the manifests of a sharded run: scenario ConfigMap, output PVC, Indexed shard Job, merge Job",
		Long: `render prints multi-document YAML for kubectl apply -f -: a ConfigMap holding the
scenario file, a ReadWriteMany PersistentVolumeClaim for the output (unless --out-volume names
an existing one), an Indexed Job of N pods where pod JOB_COMPLETION_INDEX runs
  harness run /scenario/scenario.yaml --shard $((JOB_COMPLETION_INDEX+1))/N --out /out/RUN/shard-$((JOB_COMPLETION_INDEX+1))
and a merge Job whose initContainer waits (bounded by the shard Job's deadline) for every
shard's marker /out/RUN/shard-I.done before it runs
  harness merge /out/RUN/shard-1 ... /out/RUN/shard-N --out /out/RUN/merged
RUN is the run id (label pdsoak.dev/run-id): every render is a new run, named after the
scenario, the time and four random characters; --run-id chooses it.
Deadlines and retries are derived from the scenario's duration, deadlines and drain.
For an object store, mount a bucket through a CSI driver as a PVC and pass --out-volume.`,
		Args: exactlyOne,
		RunE: func(cmd *cobra.Command, args []string) error {
			if outPath != "" {
				return usageError("--out-path %s: writing to an object store directly is not supported; mount the bucket as a ReadWriteMany PVC (an object-store CSI driver) and pass --out-volume", outPath)
			}
			if !cmd.Flags().Changed("shards") {
				return usageError("k8s render needs --shards N")
			}
			if err := a.refuseTargetFaults(args[0], o.Target); err != nil {
				return err
			}
			sc, content, err := a.loadForK8s(args[0], o.Target, o.MetricsURL)
			if err != nil {
				return err
			}
			objs, err := k8s.RenderRun(sc, content, o)
			if err == nil {
				for _, w := range k8s.Warnings(sc, o) {
					fmt.Fprintln(cmd.ErrOrStderr(), "harness: warning:", w)
				}
			}
			return printManifests(cmd, objs, err)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Shards, "shards", 0, "number of shard pods (the Indexed Job's completions and parallelism)")
	fl.StringVar(&o.Image, "image", "", "the pdsoak image (make image)")
	fl.StringVar(&o.Namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	fl.StringVar(&o.OutVolume, "out-volume", "", "an existing ReadWriteMany PVC for the output (default: render one)")
	fl.StringVar(&outPath, "out-path", "", "not supported: mount an object store as a PVC (CSI) and use --out-volume")
	fl.StringVar(&o.StorageSize, "storage", k8s.DefaultStorage, "size of the rendered output PVC")
	fl.StringVar(&o.StorageClass, "storage-class", "", "storage class of the rendered output PVC (default: the cluster's)")
	fl.StringVar(&o.Target, "target", "", "endpoint URL every shard drives, e.g. "+k8s.RouterURL("NS")+" (default: the scenario's target)")
	fl.StringVar(&o.MetricsURL, "metrics-url", "", "the target's Prometheus endpoint for every shard, e.g. "+k8s.RouterURL("NS")+"/metrics (needed by no_leaks with --target)")
	fl.StringVar(&o.RunID, "run-id", "", "names and labels the run's objects (default: a fresh one per render: the scenario name, the time and four random characters)")
	fl.StringVar(&o.Shard.CPU, "cpu", k8s.DefaultCPU, "CPU request of a shard pod (limit: twice it)")
	fl.StringVar(&o.Shard.Memory, "memory", k8s.DefaultMemory, "memory request and limit of a shard pod")
	fl.StringVar(&o.Merge.CPU, "merge-cpu", k8s.DefaultMergeCPU, "CPU request of the merge pod (limit: twice it)")
	fl.StringVar(&o.Merge.Memory, "merge-memory", k8s.DefaultMergeMemory, "memory request and limit of the merge pod")
	return cmd
}

// loadForK8s validates the scenario (with --target applied as run would) and returns it
// with the file's bytes, which the ConfigMap carries.
func (a *app) loadForK8s(arg, target, metricsURL string) (*scenarios.Scenario, []byte, error) {
	content, err := os.ReadFile(arg)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("harness: read %s: %w", arg, err)
		}
		var ok bool
		if content, ok = scenarios.Embedded(arg); !ok {
			_, err := scenarios.Load(arg) // its ErrNotFound lists the embedded names
			return nil, nil, err
		}
	}
	sc, err := scenarios.Load(arg, scenarios.WithFaultTypes(a.faultTypes), scenarios.WithReferenceCheck(referenceCheck), scenarios.WithOverrides(func(sc *scenarios.Scenario) {
		if target != "" {
			sc.Target.URL, sc.Target.Launch, sc.Target.Links = target, nil, nil
		}
		if metricsURL != "" {
			sc.Target.MetricsURL = metricsURL
		}
	}))
	if err != nil {
		return nil, nil, err
	}
	return sc, content, nil
}

func (a *app) k8sRenderReferenceCommand() *cobra.Command {
	var o k8s.ReferenceOptions
	cmd := &cobra.Command{
		Use:   "render-reference --image IMAGE",
		Short: "Print the reference PD topology (router, prefill, decode) as Deployments and Services, without GPUs",
		Long: `render-reference prints one Deployment and one Service per prefill and decode worker
(pdserver prefill / decode, tinyref backend by default: CPU only) and the router in front of
them (pdserver router --prefill ... --prefill-bootstrap ... --decode ...), each with readiness
and liveness probes on /health. A scenario then targets the router Service:
  target:
    url: ` + k8s.RouterURL("NS") + `
or harness k8s render --target ` + k8s.RouterURL("NS") + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			objs, err := k8s.RenderReference(o)
			return printManifests(cmd, objs, err)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Prefill, "prefill", 1, "prefill workers")
	fl.IntVar(&o.Decode, "decode", 1, "decode workers")
	fl.StringVar(&o.Image, "image", "", "the pdsoak image (make image)")
	fl.StringVar(&o.Namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	fl.StringVar(&o.Semantics, "semantics", "", "strict or sglang (default: pdserver's, strict)")
	fl.StringVar(&o.Backend, "backend", "", "worker compute backend (default: pdserver's, tinyref)")
	fl.StringArrayVar(&o.WorkerArgs, "worker-arg", nil, "an extra argument for every worker (repeatable)")
	fl.StringArrayVar(&o.RouterArgs, "router-arg", nil, "an extra argument for the router (repeatable)")
	fl.StringVar(&o.Worker.CPU, "worker-cpu", k8s.DefaultCPU, "CPU request of a worker (limit: twice it)")
	fl.StringVar(&o.Worker.Memory, "worker-memory", k8s.DefaultMemory, "memory request and limit of a worker")
	fl.StringVar(&o.Router.CPU, "router-cpu", k8s.DefaultMergeCPU, "CPU request of the router (limit: twice it)")
	fl.StringVar(&o.Router.Memory, "router-memory", "256Mi", "memory request and limit of the router")
	return cmd
}

// shardMarker is the content of a shard's marker file.
type shardMarker struct {
	Shard    int       `json:"shard"`
	Of       int       `json:"of"`
	Exit     int       `json:"exit"`
	Finished time.Time `json:"finished"`
}

// execArgs runs a harness command line in this process (the shard pod's image has no
// shell to run it with); tests replace it. Set in init: it builds a root command, which
// holds this command.
var execArgs func(a *app, ctx context.Context, args []string, stdout, stderr io.Writer) int

func init() { execArgs = runInProcess }

func runInProcess(a *app, ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(WithRunner(a.run), WithClock(a.now), WithStatusInterval(a.statusEvery), WithFaultTypes(a.faultTypes))
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee *ExitError
	if err != nil && (!errors.As(err, &ee) || ee.Err != nil) {
		printError(stderr, err)
	}
	return exitCode(err)
}

func (a *app) k8sShardCommand() *cobra.Command {
	var shards int
	var outRoot, indexEnv string
	cmd := &cobra.Command{
		Use:    "shard --shards N --out-root DIR -- SCENARIO [run flags]",
		Short:  "Run shard JOB_COMPLETION_INDEX+1 of N into DIR/shard-I and write its marker (what a shard pod runs)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, ok := os.LookupEnv(indexEnv)
			if !ok {
				return usageError("k8s shard: $%s is not set (the Indexed Job sets it)", indexEnv)
			}
			idx, err := strconv.Atoi(strings.TrimSpace(raw))
			if err != nil || idx < 0 || idx >= shards {
				return usageError("k8s shard: $%s=%q is not an index in [0, %d)", indexEnv, raw, shards)
			}
			i := idx + 1
			marker, dir := k8s.MarkerPath(outRoot, i), k8s.ShardDir(outRoot, i)
			// A retried attempt starts afresh: no marker, no output of the failed one.
			if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("harness: k8s shard: %w", err)
			}
			if err := os.RemoveAll(dir); err != nil {
				return fmt.Errorf("harness: k8s shard: %w", err)
			}
			run := append([]string{"run", args[0], "--shard", fmt.Sprintf("%d/%d", i, shards), "--out", dir}, args[1:]...)
			fmt.Fprintf(cmd.ErrOrStderr(), "harness k8s shard: harness %s\n", strings.Join(run, " "))
			code := execArgs(a, cmd.Context(), run, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if code != ExitPass && code != ExitFail {
				return &ExitError{Code: code}
			}
			// Pass or fail, the shard's part is complete: the merged verdict decides.
			b, _ := json.Marshal(shardMarker{Shard: i, Of: shards, Exit: code, Finished: a.now().UTC()})
			if err := os.WriteFile(marker, append(b, '\n'), 0o644); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: k8s shard: marker: %w", err)}
			}
			if code == ExitFail {
				fmt.Fprintf(cmd.ErrOrStderr(), "harness k8s shard: shard %d/%d's own verdict is FAIL; the merge decides the run's\n", i, shards)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&shards, "shards", 0, "N, the number of shards")
	cmd.Flags().StringVar(&outRoot, "out-root", k8s.OutDir, "the shared output directory")
	cmd.Flags().StringVar(&indexEnv, "index-env", "JOB_COMPLETION_INDEX", "variable holding the 0-based shard index")
	return cmd
}

func (a *app) k8sWaitShardsCommand() *cobra.Command {
	var shards int
	var outRoot string
	var timeout, poll time.Duration
	cmd := &cobra.Command{
		Use:    "wait-shards --shards N --out-root DIR --timeout D",
		Short:  "Wait until every shard's marker DIR/shard-I.done exists (the merge Job's initContainer)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if shards < 1 || timeout <= 0 || poll <= 0 {
				return usageError("k8s wait-shards needs --shards >= 1, --timeout > 0 and --poll > 0")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			tick := time.NewTicker(poll)
			defer tick.Stop()
			last := -1
			for {
				var missing []string
				for i := 1; i <= shards; i++ {
					if _, err := os.Stat(k8s.MarkerPath(outRoot, i)); err != nil {
						missing = append(missing, strconv.Itoa(i))
					}
				}
				if done := shards - len(missing); done != last {
					fmt.Fprintf(cmd.ErrOrStderr(), "harness k8s wait-shards: %d of %d shards done\n", done, shards)
					last = done
				}
				if len(missing) == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: k8s wait-shards: after %s, shards %s have no marker in %s: the run is incomplete",
						timeout, strings.Join(missing, ", "), outRoot)}
				case <-tick.C:
				}
			}
		},
	}
	cmd.Flags().IntVar(&shards, "shards", 0, "N, the number of shards")
	cmd.Flags().StringVar(&outRoot, "out-root", k8s.OutDir, "the shared output directory")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "how long to wait for all markers")
	cmd.Flags().DurationVar(&poll, "poll", 2*time.Second, "how often to look")
	return cmd
}

// printManifests writes rendered objects as one multi-document YAML stream; a rendering
// error is the user's (bad options or scenario: exit 2).
func printManifests(cmd *cobra.Command, objs []runtime.Object, err error) error {
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	out, err := k8s.YAML(objs)
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}
