package router

import (
	"context"
	"log/slog"
)

// reqLog is a request's logger with its attributes, built on first use: slog's With
// formats the attributes at once, and at the usual levels most requests log nothing.
// One goroutine (the request's) uses it.
type reqLog struct {
	base  *slog.Logger
	attrs []any
	l     *slog.Logger
}

func (l *reqLog) with(attrs ...any) *reqLog {
	return &reqLog{base: l.base, attrs: append(append([]any(nil), l.attrs...), attrs...)}
}

func (l *reqLog) enabled(level slog.Level) bool { return l.base.Enabled(context.Background(), level) }

func (l *reqLog) log(level slog.Level, msg string, args ...any) {
	if !l.enabled(level) {
		return
	}
	if l.l == nil {
		l.l = l.base.With(l.attrs...)
	}
	l.l.Log(context.Background(), level, msg, args...)
}

func (l *reqLog) Info(msg string, args ...any) { l.log(slog.LevelInfo, msg, args...) }
func (l *reqLog) Warn(msg string, args ...any) { l.log(slog.LevelWarn, msg, args...) }
