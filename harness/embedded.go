package harness

import (
	"context"
	"errors"
	"log/slog"

	"pdsoak/scenarios"
)

// startEmbedded starts the reference PD topology for a scenario without target.url.
// It is replaced by the launcher integration (embedded_launcher.go).
var startEmbedded = func(ctx context.Context, sc *scenarios.Scenario, opts Options, log *slog.Logger) (Target, error) {
	return nil, errors.New("harness: the embedded reference server is not available in this build")
}
