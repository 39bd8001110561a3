package cli

import (
	"context"
	"errors"
	"log/slog"

	"pdsoak/chaos"
	"pdsoak/harness"
	"pdsoak/ledger"
	"pdsoak/scenarios"
	"pdsoak/sim"
)

// RunOptions is what the CLI hands a runner (mirrors harness.Options).
type RunOptions struct {
	OutDir          string
	Logger          *slog.Logger
	OnEvent         func(ledger.Event)
	PDServerCommand []string
	// Notes are messages for the report's reader; the runner writes each as a note
	// event after run_start.
	Notes []string
	// Shard makes the run one shard of a sharded run (zero: the whole scenario).
	Shard harness.Shard
	// Hurry ends on a second Ctrl-C (see harness.Options.Hurry).
	Hurry context.Context
}

// RunFunc runs a validated scenario, writing OutDir/events.jsonl. Its error says the run
// itself failed (infrastructure); assertion results come from the ledger.
type RunFunc func(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error

// harnessRun is the real runner.
func harnessRun(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
	return harness.Run(ctx, sc, harness.Options{
		OutDir:          opts.OutDir,
		Logger:          opts.Logger,
		OnEvent:         opts.OnEvent,
		PDServerCommand: opts.PDServerCommand,
		Notes:           opts.Notes,
		Shard:           opts.Shard,
		Hurry:           opts.Hurry,
	})
}

// simRun is the runner of `run --sim`: the simulator, writing the same ledger.
func simRun(ctx context.Context, sc *scenarios.Scenario, opts RunOptions) error {
	return sim.Run(ctx, sc, sim.Options{OutDir: opts.OutDir, Logger: opts.Logger, OnEvent: opts.OnEvent, Notes: opts.Notes})
}

// faultTypes is the chaos registry in the form scenario validation takes.
func faultTypes() map[string]scenarios.FaultType { return chaos.FaultTypes() }

// isScenarioError reports whether a run error is the scenario's fault (exit 2) rather than
// the infrastructure's (exit 3).
func isScenarioError(err error) bool {
	return errors.Is(err, chaos.ErrBadSpec) || errors.Is(err, chaos.ErrUnknownType) || errors.Is(err, sim.ErrNotModelled)
}
