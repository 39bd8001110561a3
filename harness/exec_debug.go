package harness

import (
	"context"
	"log/slog"
)

// debugOn reports whether the executor's log takes debug lines. The per-request debug
// calls ask first: their arguments are boxed into a []any on the heap before slog
// can drop the line, ~7 allocations per request at the default info level.
func (e *executor) debugOn() bool {
	return e.log.Enabled(context.Background(), slog.LevelDebug)
}
