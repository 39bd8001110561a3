package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/internal/benchtable"
)

// benchLog is go test output for one figure of the declared table.
const benchLog = "pkg: pdsoak/server/kvtransfer\n" +
	"BenchmarkTransfer-2\t284\t7902351 ns/op\t0.8259 kv/raw\nok  \tpdsoak/server/kvtransfer\t9.0s\n"

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	logFile := write("bench.log", benchLog)
	emptyLog := write("empty.log", "PASS\n")
	docs := write("BENCHMARKS.md", "# Benchmarks\n\n"+benchtable.BeginMarker+"\nold\n"+benchtable.EndMarker+"\n")
	noMarkers := write("plain.md", "# Benchmarks\n")
	out := filepath.Join(dir, "bench.md")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings
		stderr string
	}{
		{"table from a log", []string{"-in", logFile, "-o", out, "-docs", docs, "-command", "make bench"}, 0,
			[]string{"by `make bench` on ", "| `kv/raw` | ≥ 0.8 | 0.8259 | PASS |", "| `ratio` | ≥ 0.95 | — | MISS: not run: benchmark not found |"}, ""},
		{"nothing measured", []string{"-in", emptyLog, "-o", ""}, 1, []string{"0 of "}, "no benchmark produced a result"},
		{"missing input", []string{"-in", filepath.Join(dir, "nope.log")}, 2, nil, "no such file"},
		{"bad flag", []string{"-frobnicate"}, 2, nil, "flag provided but not defined"},
		{"stray argument", []string{"-in", logFile, "extra"}, 2, nil, `unexpected arguments ["extra"]`},
		{"docs without markers", []string{"-in", logFile, "-o", "", "-docs", noMarkers}, 1, nil, "lacks the"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			require.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			for _, s := range tc.stdout {
				require.Contains(t, stdout.String(), s)
			}
			require.Contains(t, stderr.String(), tc.stderr)
		})
	}
	// The first case wrote bench.md and the docs section: both hold the printed table.
	md, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(md), "| `kv/raw` | ≥ 0.8 | 0.8259 | PASS |")
	doc, err := os.ReadFile(docs)
	require.NoError(t, err)
	require.Contains(t, string(doc), benchtable.BeginMarker+"\nMeasured ")
	require.Contains(t, string(doc), string(bytes.TrimSpace(md))+"\n"+benchtable.EndMarker)
	require.NotContains(t, string(doc), "old")
}
