package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/harness"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
	"pdsoak/scenarios"
)

// ShardStartEnv carries the shared start time to every shard when --shard-start is not
// given (a launcher sets it once for all pods).
const ShardStartEnv = "PDSOAK_SHARD_START"

// shardFlags are run's --shard and --shard-start.
type shardFlags struct {
	shard string
	start string
}

func (f *shardFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.shard, "shard", "", "run shard i of n (e.g. 2/4): a deterministic, disjoint part of every workload; only shard 1 applies faults; merge the shards' output directories with `harness merge`")
	fs.StringVar(&f.start, "shard-start", "", "RFC 3339 time every shard waits for before it starts, so their clock skew is measured (default $"+ShardStartEnv+")")
}

// parse returns the shard (zero when --shard is not given).
func (f *shardFlags) parse() (harness.Shard, error) {
	start := f.start
	if start == "" {
		start = os.Getenv(ShardStartEnv)
	}
	if f.shard == "" {
		if f.start != "" {
			return harness.Shard{}, usageError("--shard-start needs --shard i/n")
		}
		return harness.Shard{}, nil
	}
	i, n, err := ledger.ParseShard(f.shard)
	if err != nil {
		return harness.Shard{}, usageError("--shard: %v", err)
	}
	sh := harness.Shard{Index: i, Count: n}
	if start != "" {
		t, err := time.Parse(time.RFC3339Nano, start)
		if err != nil {
			return harness.Shard{}, usageError("--shard-start (or $%s) %q: want an RFC 3339 time, e.g. 2026-01-02T15:04:05Z", ShardStartEnv, start)
		}
		sh.Start = t
	}
	return sh, nil
}

func (a *app) mergeCommand() *cobra.Command {
	var outDir string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "merge SHARD_DIR... --out DIR",
		Short: "Merge the output directories of the shards of one run into one ledger and one verdict",
		Long: `merge reads the events.jsonl and scenario.json of every shard of a run (harness run
--shard i/n), writes one ordered ledger carrying each fault once, then results.json, junit.xml,
summary.md and report.html as if one process had run the whole scenario, and exits with the
verdict's code (0 pass, 1 fail, 3 invalid). A shard missing from 1..n, given twice, torn or
without run_end, or from another scenario or seed makes the merged run invalid.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if outDir == "" {
				return usageError("merge: --out DIR is required")
			}
			sc, digestProblems, err := mergeScenario(args)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: merge: %w", err)}
			}
			var paths []string
			for _, d := range args {
				paths = append(paths, filepath.Join(d, ledger.EventsFile))
			}
			f, err := os.Create(filepath.Join(outDir, ledger.EventsFile))
			if err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: merge: %w", err)}
			}
			mres, err := ledger.Merge(paths, f, digestProblems...)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
			}
			if err := writeResolved(outDir, sc); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			// reports judges the merged ledger: every merge problem is in its run_end.
			res, _ := computeResults(outDir, sc)
			if err := render.WriteAll(outDir, res); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			out := cmd.OutOrStdout()
			if !quiet {
				_ = render.WriteTable(out, res)
				fmt.Fprintf(out, "\nmerged %d shard ledgers (%d events) into %s\n", len(args), mres.Events, outDir)
			} else {
				fmt.Fprintf(out, "%s (%s)\n", render.VerdictLine(res), outDir)
			}
			switch res.Verdict {
			case reports.VerdictInvalid:
				return &ExitError{Code: ExitInfra}
			case reports.VerdictFail:
				return &ExitError{Code: ExitFail}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&outDir, "out", "", "output directory of the merged run (required)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print the verdict line only")
	return cmd
}

// mergeScenario reads every shard's scenario.json: the first is the merged run's
// scenario; any that differs is a reason the merge is invalid.
func mergeScenario(dirs []string) (*scenarios.Scenario, []string, error) {
	var first []byte
	var problems []string
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ResolvedFile))
		if err != nil {
			return nil, nil, usageError("%s is not a run's output directory: %v", d, err)
		}
		if first == nil {
			first = data
		} else if !bytes.Equal(bytes.TrimSpace(first), bytes.TrimSpace(data)) {
			problems = append(problems, fmt.Sprintf("%s ran another scenario than %s (scenario.json differs)", d, dirs[0]))
		}
	}
	var sc scenarios.Scenario
	if err := json.Unmarshal(first, &sc); err != nil {
		return nil, nil, usageError("%s: %v", filepath.Join(dirs[0], ResolvedFile), strings.TrimSpace(err.Error()))
	}
	return &sc, problems, nil
}
