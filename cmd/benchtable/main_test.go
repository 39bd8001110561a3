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

// benchLog3 is three runs of BenchmarkOpenLoopMaxRate as make bench logs them.
const benchLog3 = "benchtable: before cpus=2 loadavg=0.1\npkg: pdsoak/harness\n" +
	"BenchmarkOpenLoopMaxRate-2\t1\t5 ns/op\t1.3 ratio\t0.97 ratio_64_workers\nok  \tpdsoak/harness\t9.0s\n" +
	"benchtable: after loadavg=1.1 wall_s=9 cpu_s=14 others_cpus=0.01\n" +
	"benchtable: before cpus=2 loadavg=0.7\npkg: pdsoak/harness\n" +
	"BenchmarkOpenLoopMaxRate-2\t1\t5 ns/op\t0.77 ratio\t0.94 ratio_64_workers\nok  \tpdsoak/harness\t9.0s\n" +
	"benchtable: after loadavg=2.6 wall_s=9 cpu_s=14 others_cpus=1.2\n" +
	"benchtable: before cpus=2 loadavg=0.9\npkg: pdsoak/harness\n" +
	"BenchmarkOpenLoopMaxRate-2\t1\t5 ns/op\t0.75 ratio\t0.96 ratio_64_workers\nok  \tpdsoak/harness\t9.0s\n" +
	"benchtable: after loadavg=1.2 wall_s=9 cpu_s=14 others_cpus=0.02\n"

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	logFile := write("bench.log", benchLog)
	log3 := write("bench3.log", benchLog3)
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
			[]string{"by `make bench` on ", "| `kv/raw` | ≥ 0.8 | 0.8259 | one run | — | — | PASS |",
				"| `ratio_64_workers` | ≥ 0.95 | — | — | — | — | MISS: not run: benchmark not found |"}, ""},
		{"several runs per benchmark", []string{"-in", log3, "-o", ""}, 0,
			[]string{"| `ratio_64_workers` | ≥ 0.95 | 0.96 | 0.94–0.97 (3 runs) | 0.10→1.10, 0.70→2.60, 0.90→1.20 | 0.01, 1.20, 0.02 | PASS, under load (1 of 3 runs) |",
				"| `ratio` | info | 0.77 | 0.75–1.3 (3 runs) |", "for information only"}, ""},
		{"bad count", []string{"-in", logFile, "-count", "0"}, 2, nil, "-count 0: want at least 1"},
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
	require.Contains(t, string(md), "| `kv/raw` | ≥ 0.8 | 0.8259 | one run | — | — | PASS |")
	doc, err := os.ReadFile(docs)
	require.NoError(t, err)
	require.Contains(t, string(doc), benchtable.BeginMarker+"\nMeasured ")
	require.Contains(t, string(doc), string(bytes.TrimSpace(md))+"\n"+benchtable.EndMarker)
	require.NotContains(t, string(doc), "old")
}

func TestDefaultCount(t *testing.T) {
	for env, want := range map[string]int{"": 3, "5": 5, " 1 ": 1, "three": 0, "-2": -2} {
		require.Equal(t, want, defaultCount(env), "BENCH_COUNT=%q", env)
	}
}
