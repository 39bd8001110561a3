// Command gatecal calibrates harness compare's regression gate (package
// pdsoak/harness/gatecal): `make gate-calibration`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"pdsoak/harness/gatecal"
)

func main() {
	pairs := flag.Int("pairs", gatecal.DefaultPairs, "pairs of each kind (same server, and each slowdown)")
	slow := flag.String("slowdowns", "0.10,0.25", "known slowdowns of NEW, comma-separated fractions")
	real := flag.String("real", "", "run on the real reference server: argv of its root command, space-separated (e.g. \"bin/pdserver\"); default: the simulator")
	dir := flag.String("dir", "", "keep the runs here (default: a temporary directory)")
	parallel := flag.Int("parallel", 0, "runs at once (default: CPUs; 1 with -real)")
	save := flag.String("save", "", "also write the compared pairs as JSON to this file")
	from := flag.String("from", "", "re-evaluate pairs saved with -save under the current floors instead of running")
	seed := flag.Int64("seed", gatecal.DefaultSeed, "first pair's BASE seed (pair i runs seeds SEED+2i and SEED+2i+1): another seed gives fresh pairs")
	flag.Parse()
	if *from != "" {
		rep, err := gatecal.Load(*from)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		finish(rep, "")
		return
	}
	cfg := gatecal.Config{Pairs: *pairs, Dir: *dir, Parallel: *parallel, Seed: *seed,
		Progress: func(s string) { fmt.Fprintln(os.Stderr, s) }}
	for _, f := range strings.Split(*slow, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "gatecal: -slowdowns: %q is not a positive fraction\n", f)
			os.Exit(2)
		}
		cfg.Slowdowns = append(cfg.Slowdowns, v)
	}
	if *real != "" {
		cfg.Run, cfg.Mode = gatecal.RealRun(strings.Fields(*real)), "real"
		if cfg.Parallel == 0 {
			cfg.Parallel = 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := gatecal.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	finish(rep, *save)
}

// finish prints the figures (and saves the pairs); exit 1 when the goals are not met.
func finish(rep *gatecal.Report, save string) {
	if save != "" {
		if err := rep.Save(save); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if ok, _ := rep.Met(); !ok {
		os.Exit(1)
	}
}
