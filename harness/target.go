package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"

	"pdsoak/harness/target"
	"pdsoak/scenarios"
)

// startLaunched starts the processes of target.launch (logs in OutDir/logs), then
// reaches target.url.
func startLaunched(ctx context.Context, sc *scenarios.Scenario, opts Options, log *slog.Logger, hc *http.Client) (target.Target, error) {
	t, err := target.StartLaunched(ctx, sc.Target, filepath.Join(opts.OutDir, "logs"),
		target.WithLogger(log), target.WithDebugProbe(probeDebugURL(hc)))
	if err != nil {
		return nil, fmt.Errorf("harness: %w: %w", err, ErrInfrastructure)
	}
	return t, nil
}

// startEmbedded starts the reference server of a scenario without target.url, logs in
// OutDir/logs.
func startEmbedded(ctx context.Context, sc *scenarios.Scenario, opts Options, log *slog.Logger) (target.Target, error) {
	cmd, err := pdserverCommand(opts)
	if err != nil {
		return nil, err
	}
	return target.StartEmbedded(ctx, sc.Reference, cmd, filepath.Join(opts.OutDir, "logs"), target.WithLogger(log))
}

// openExternal reaches target.url.
func openExternal(ctx context.Context, sc *scenarios.Scenario, hc *http.Client) (target.Target, error) {
	t, err := target.OpenExternal(ctx, sc.Target, target.WithDebugProbe(probeDebugURL(hc)))
	if err != nil {
		return nil, fmt.Errorf("harness: %w: %w", err, ErrInfrastructure)
	}
	return t, nil
}

// probeDebugURL accepts a URL that answers like /debug/requests.
func probeDebugURL(hc *http.Client) func(context.Context, string) error {
	return func(ctx context.Context, url string) error {
		_, err := fetchDebug(ctx, hc, url)
		return err
	}
}

// pdserverCommand resolves the command that runs the reference server.
func pdserverCommand(opts Options) ([]string, error) {
	if len(opts.PDServerCommand) > 0 {
		return opts.PDServerCommand, nil
	}
	if p, err := exec.LookPath("pdserver"); err == nil {
		return []string{p}, nil
	}
	return nil, errors.New("harness: no reference server command (Options.PDServerCommand empty and no pdserver in PATH)")
}
