package api

import (
	"context"
	"log/slog"
	"sync"
)

// lazyAttrs is a slog.Handler whose WithAttrs only remembers the attributes: the wrapped
// handler formats them (slog's built-in handlers do so at once, in WithAttrs) the first
// time a record is actually handled. Every request derives a logger with its id, path
// and room, and at the usual levels most requests log nothing on the hot path.
type lazyAttrs struct {
	base  slog.Handler // has every group opened before attrs
	attrs []slog.Attr

	once  sync.Once
	built slog.Handler
}

// lazyLogger wraps l's handler in lazyAttrs (nil stays nil).
func lazyLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	if _, ok := l.Handler().(*lazyAttrs); ok {
		return l
	}
	return slog.New(&lazyAttrs{base: l.Handler()})
}

func (h *lazyAttrs) handler() slog.Handler {
	h.once.Do(func() {
		h.built = h.base
		if len(h.attrs) > 0 {
			h.built = h.base.WithAttrs(h.attrs)
		}
	})
	return h.built
}

func (h *lazyAttrs) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

func (h *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &lazyAttrs{base: h.base, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

// WithGroup opens the group on the formatted handler: attributes before it belong
// outside the group.
func (h *lazyAttrs) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &lazyAttrs{base: h.handler().WithGroup(name)}
}
