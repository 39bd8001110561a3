package api

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLazyAttrsLogsWhatTheHandlerWould: a logger behind lazyAttrs writes exactly the
// lines the wrapped handler writes, attributes, groups and levels included.
func TestLazyAttrsLogsWhatTheHandlerWould(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"plain", func(l *slog.Logger) { l.Info("hi", "k", 1) }},
		{"with", func(l *slog.Logger) { l.With("rid", "a", "path", "/x").With("room", 7).Warn("w", "err", "e") }},
		{"group", func(l *slog.Logger) { l.With("a", 1).WithGroup("g").With("b", 2).Info("m", "c", 3) }},
		{"below level", func(l *slog.Logger) { l.With("rid", "a").Debug("hidden") }},
		{"shared parent", func(l *slog.Logger) {
			p := l.With("rid", "p")
			p.Info("one")
			p.With("x", 1).Info("two")
			p.Info("three")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}
			tc.log(slog.New(slog.NewTextHandler(&want, opts)))
			tc.log(lazyLogger(slog.New(slog.NewTextHandler(&got, opts))))
			require.Equal(t, want.String(), got.String())
			if tc.name == "below level" {
				require.Empty(t, strings.TrimSpace(got.String()))
			}
		})
	}
}
