// Command benchtable is `make bench`: it runs the benchmarks behind the project's
// performance figures, prints one table of figure, goal, measured value and PASS/MISS,
// and writes it to bench.md (see internal/benchtable and docs/BENCHMARKS.md).
//
//	benchtable [-count 3] [-o bench.md] [-log bench.log] [-docs docs/BENCHMARKS.md] [-timeout 4m] [-budget 10m]
//	benchtable -in bench.log    # build the table from go test -bench output instead
//
// Each benchmark runs -count times (default $BENCH_COUNT, else 3), each in its own
// process; the table shows the median, the spread and the machine's load around each run.
// The budget is per count: the whole run is bounded by count × budget.
//
// A figure that misses its goal, or whose benchmark is missing or failed, is reported, not
// an error: the exit status is 0 unless nothing could be measured at all (1), or the flags
// are wrong (2).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"pdsoak/internal/benchtable"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "read go test -bench output from this file (- for stdin) instead of running the benchmarks")
	outPath := fs.String("o", "bench.md", "write the table here (empty: nowhere)")
	logPath := fs.String("log", "bench.log", "write the benchmarks' go test output here (empty: nowhere)")
	docs := fs.String("docs", "", "also replace the marked table section of this file (docs/BENCHMARKS.md)")
	timeout := fs.Duration("timeout", 4*time.Minute, "bound on each benchmark run, build included")
	budget := fs.Duration("budget", 10*time.Minute, "bound on the whole run, per count (count × budget in all): runs that would start later are not run")
	count := fs.Int("count", defaultCount(os.Getenv("BENCH_COUNT")), "runs of each benchmark, each in its own process (default: $BENCH_COUNT, else 3)")
	command := fs.String("command", "", "the command named in the table's header (default: this command line)")
	goCmd := fs.String("go", "go", "the go command")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *count < 1 {
		fmt.Fprintf(stderr, "benchtable: -count %d: want at least 1 (BENCH_COUNT=%q)\n", *count, os.Getenv("BENCH_COUNT"))
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "benchtable: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *command == "" {
		*command = strings.Join(append([]string{"benchtable"}, args...), " ")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := moduleRoot(ctx, *goCmd)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	module, err := benchtable.ModulePath(dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var out *benchtable.Output
	load := ""
	if *in != "" {
		out, err = parseFile(*in)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	} else {
		load = benchtable.LoadAverage()
		r := &benchtable.Runner{Go: *goCmd, Dir: dir, Module: module, Timeout: *timeout, Count: *count,
			Budget: *budget * time.Duration(*count), Progress: stderr}
		if *logPath != "" {
			f, err := os.Create(*logPath)
			if err != nil {
				fmt.Fprintln(stderr, "benchtable:", err)
				return 1
			}
			defer f.Close()
			r.Log = f
		}
		out, err = r.Run(ctx, benchtable.Benchmarks)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	rows := benchtable.Evaluate(benchtable.Benchmarks, out, module)
	var doc bytes.Buffer
	m := benchtable.DescribeMachine(ctx, *goCmd, dir, out.Env)
	m.Load = load
	if err := benchtable.Document(&doc, rows, m, *command, time.Now()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprint(stdout, "\n"+doc.String())
	if *outPath != "" {
		if err := os.WriteFile(*outPath, doc.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, "benchtable:", err)
			return 1
		}
	}
	if *docs != "" {
		if err := replaceDocs(*docs, doc.Bytes()); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if len(out.Results) == 0 {
		fmt.Fprintln(stderr, "benchtable: no benchmark produced a result")
		return 1
	}
	return 0
}

// defaultCount is BENCH_COUNT as a number, 3 when it is unset; a value that is not a
// number is 0, which run refuses with the variable named.
func defaultCount(env string) int {
	if env == "" {
		return 3
	}
	n, err := strconv.Atoi(strings.TrimSpace(env))
	if err != nil {
		return 0
	}
	return n
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context, goCmd string) (string, error) {
	b, err := execOutput(ctx, goCmd, "env", "GOMOD")
	if err != nil {
		return "", fmt.Errorf("benchtable: %s env GOMOD: %w", goCmd, err)
	}
	gomod := strings.TrimSpace(b)
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("benchtable: not inside a Go module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

func parseFile(path string) (*benchtable.Output, error) {
	if path == "-" {
		return benchtable.Parse(os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("benchtable: %w", err)
	}
	defer f.Close()
	out, err := benchtable.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

func replaceDocs(path string, section []byte) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("benchtable: %w", err)
	}
	doc, err = benchtable.ReplaceSection(doc, section)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, doc, 0o644)
}

func execOutput(ctx context.Context, name string, args ...string) (string, error) {
	b, err := exec.CommandContext(ctx, name, args...).Output()
	return string(b), err
}
