package benchtable

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Runner runs benchmarks with the go command, one `go test` process each, so that every
// benchmark has its own -benchtime and one that hangs or crashes costs only its figures.
type Runner struct {
	Go      string        // the go command; "go" when empty
	Dir     string        // the module root, where go test runs
	Module  string        // the module path (ModulePath reads it)
	Timeout time.Duration // per benchmark run, build included; go test's -timeout does not cover benchmarks
	// Count is how many times each benchmark runs, each in its own process (0: once).
	// The runs go in rounds (every benchmark once, then again) so that a passing burst
	// of load on the machine lands on one run of several benchmarks, not on every run of
	// one.
	Count int
	// Budget bounds the whole run: a benchmark gets at most what is left of it, and one
	// that would start after it is spent is not run (0: no bound).
	Budget time.Duration
	// Log receives every go test output as it comes, after a "$ go test ..." line (nil: none).
	Log io.Writer
	// Progress receives one line per benchmark (nil: none).
	Progress io.Writer
}

// Args is the go test command line for b.
func (b Benchmark) Args() []string {
	return []string{"test", "-run", "^$", "-bench", "^" + b.Name + "$", "-benchtime", b.BenchTime,
		"-count", "1", "-v", b.Package}
}

// Run runs each benchmark Count times and merges what their outputs say. Its error is
// only for a go command that could not be started at all; everything else is in the
// Output.
func (r *Runner) Run(ctx context.Context, benchmarks []Benchmark) (*Output, error) {
	all := &Output{Env: map[string]string{}}
	began := time.Now()
	count := max(r.Count, 1)
	for round := 1; round <= count; round++ {
		for _, b := range benchmarks {
			if err := r.runOne(ctx, all, b, round, count, began); err != nil {
				return all, err
			}
		}
	}
	return all, nil
}

// runOne runs b once (round of count) and adds what it printed to all.
func (r *Runner) runOne(ctx context.Context, all *Output, b Benchmark, round, count int, began time.Time) error {
	start := time.Now()
	timeout := r.Timeout
	if r.Budget > 0 {
		left := r.Budget - time.Since(began)
		if left <= 0 {
			all.Failures = append(all.Failures, Failure{Package: importPath(r.Module, b.Package), Name: b.Name,
				NotRun: true, Reason: fmt.Sprintf("the run's time budget (%s) was spent", r.Budget)})
			return nil
		}
		if timeout <= 0 || left < timeout {
			timeout = left
		}
	}
	out, load, err := r.one(ctx, b, timeout)
	if err != nil {
		return err
	}
	for k, v := range out.Env {
		all.Env[k] = v
	}
	all.Results = append(all.Results, out.Results...)
	all.Failures = append(all.Failures, out.Failures...)
	if r.Progress != nil {
		fmt.Fprintf(r.Progress, "benchtable: %s %s (-benchtime %s, run %d of %d): %d result lines, %s, load %s -> %s, others %s CPUs\n",
			b.Package, b.Name, b.BenchTime, round, count, len(out.Results), time.Since(start).Round(100*time.Millisecond),
			fmtNum(load.Before), fmtNum(load.After), fmtNum(math.Round(load.OthersCPUs*100)/100))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("benchtable: %w", ctx.Err())
	}
	return nil
}

// Where the machine's load is read (variables for tests).
var (
	procLoadavg = "/proc/loadavg"
	procStat    = "/proc/stat"
)

func (r *Runner) one(ctx context.Context, b Benchmark, timeout time.Duration) (*Output, RunLoad, error) {
	pkg := importPath(r.Module, b.Package)
	load := unknownLoad()
	if st, err := os.Stat(filepath.Join(r.Dir, b.Package)); err != nil || !st.IsDir() {
		return &Output{Failures: []Failure{{Package: pkg, Name: b.Name, NotRun: true,
			Reason: "package " + b.Package + " not found"}}}, load, nil
	}
	goCmd := r.Go
	if goCmd == "" {
		goCmd = "go"
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, goCmd, b.Args()...)
	cmd.Dir = r.Dir
	// The test binary is go's child: kill the whole group, or a hung benchmark outlives us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	w := io.Writer(&buf)
	if r.Log != nil {
		fmt.Fprintf(r.Log, "$ %s %s\n", goCmd, strings.Join(b.Args(), " "))
		w = io.MultiWriter(&buf, r.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	load.CPUs, load.Before = runtime.NumCPU(), loadAvg1(procLoadavg)
	io.WriteString(w, beforeLine(load.CPUs, load.Before))
	busy0, ok0 := busySeconds(procStat)
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	busy1, ok1 := busySeconds(procStat)
	load.After, load.Wall = loadAvg1(procLoadavg), wall.Seconds()
	if ps := cmd.ProcessState; ps != nil {
		// wait4's usage of go test includes the test binary and the servers it ran.
		load.OwnCPU = (ps.UserTime() + ps.SystemTime()).Seconds()
	}
	load.OthersCPUs = othersCPUs(busy0, busy1, ok0 && ok1 && cmd.ProcessState != nil, load.OwnCPU, wall)
	tail := lastLine(buf.Bytes())
	io.WriteString(w, afterLine(load))
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) && ctx.Err() == nil {
		return nil, load, fmt.Errorf("benchtable: run %s: %w", goCmd, runErr)
	}
	out, err := Parse(&buf)
	if err != nil {
		return nil, load, err
	}
	switch {
	case ctx.Err() != nil:
		out.Failures = append(out.Failures, Failure{Package: pkg, Name: b.Name,
			Reason: fmt.Sprintf("timed out after %s", timeout.Round(time.Second))})
	case runErr != nil && len(out.Failures) == 0:
		out.Failures = append(out.Failures, Failure{Package: pkg,
			Reason: fmt.Sprintf("go test: %v: %s", runErr, tail)})
	}
	return out, load, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// ModulePath reads the module path from dir/go.mod.
func ModulePath(dir string) (string, error) {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("benchtable: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("benchtable: %s: no module line", filepath.Join(dir, "go.mod"))
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs      int    // runtime.NumCPU: the CPUs this process may use (as nproc)
	CPUModel  string // /proc/cpuinfo's "model name", else go test's "cpu:" line
	GoVersion string // `go env GOVERSION` of the go command that ran the benchmarks
	OSArch    string
	Commit    string // short revision, "+dirty" with uncommitted changes; "" outside git
	// Load is /proc/loadavg's 1-minute figure when the benchmarks started ("" unknown):
	// other work on the machine moves every figure.
	Load string
}

func (m Machine) String() string {
	s := fmt.Sprintf("%d CPUs (%s), %s %s", m.CPUs, m.CPUModel, m.GoVersion, m.OSArch)
	if m.Commit != "" {
		s += ", commit " + m.Commit
	}
	if m.Load != "" {
		s += ", load average " + m.Load + " at the start"
	}
	return s
}

// LoadAverage is /proc/loadavg's 1-minute figure ("" where there is none).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// DescribeMachine reads the machine's description; what it cannot learn stays "unknown".
func DescribeMachine(ctx context.Context, goCmd, dir string, env map[string]string) Machine {
	if goCmd == "" {
		goCmd = "go"
	}
	m := Machine{CPUs: runtime.NumCPU(), CPUModel: "unknown", GoVersion: "unknown",
		OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if model := cpuModel("/proc/cpuinfo"); model != "" {
		m.CPUModel = model
	} else if c := env["cpu"]; c != "" {
		m.CPUModel = c
	}
	if v := output(ctx, dir, goCmd, "env", "GOVERSION"); v != "" {
		m.GoVersion = v
	}
	if c := output(ctx, dir, "git", "rev-parse", "--short", "HEAD"); c != "" {
		m.Commit = c
		if output(ctx, dir, "git", "status", "--porcelain", "--untracked-files=no") != "" {
			m.Commit += "+dirty"
		}
	}
	return m
}

func cpuModel(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func output(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
