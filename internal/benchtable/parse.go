package benchtable

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Output is what Parse found in `go test -bench` output.
type Output struct {
	// Env holds the header lines go test prints before the first result: goos, goarch,
	// cpu (the last value seen of each).
	Env      map[string]string
	Results  []Result
	Failures []Failure
}

// Result is one benchmark result line.
type Result struct {
	Package    string // import path, from the "pkg:" line or the package's ok/FAIL line
	Name       string // without the -GOMAXPROCS suffix: "BenchmarkTransfer", "BenchmarkX/sub"
	Procs      int    // the -N suffix (1 when absent)
	Iterations int64
	Metrics    map[string]float64 // unit -> value: "ns/op", "MB/s", "kv/raw", ...
	Line       int                // 1-based line number in the input
	// Load is the machine's load around the run that printed this line, from the
	// runner's "benchtable: before/after" lines (nil: the output has none).
	Load *RunLoad
}

// Failure is a benchmark that failed or was skipped (Name set), or a package that did not
// build or whose test binary failed (Name empty).
type Failure struct {
	Package string
	Name    string
	Skipped bool
	NotRun  bool   // never started (no such package, timed out before any output)
	Reason  string // the first line the benchmark or package logged, "" if none
	Line    int
}

// Parse reads `go test -bench` output, with or without -v. Lines it does not recognise
// (a benchmark's own logging, build commands) are ignored; only a read error is an error.
func Parse(r io.Reader) (*Output, error) {
	p := parser{out: &Output{Env: map[string]string{}}, logs: map[string][]string{}, build: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		p.n++
		p.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchtable: read benchmark output, line %d: %w", p.n+1, err)
	}
	p.endPackage("")
	p.fillReasons()
	return p.out, nil
}

type parser struct {
	out  *Output
	n    int
	pkg  string                          // from the last "pkg:" line
	from struct{ results, failures int } // first record of the package being read
	// logs collects the indented lines after a benchmark's name, result or ---
	// line, keyed by benchmark name: the reason a failure reports.
	logs    map[string][]string
	logKey  string
	build   map[string][]string // "# pkg" blocks: build and setup errors
	buildOf string
	panic   string // the first "panic:" line since the last package end
	// run is the load of the run whose "benchtable: before" line was read last, and
	// runFrom its first result.
	run     *RunLoad
	runFrom int
}

func (p *parser) line(s string) {
	if strings.HasPrefix(s, "    ") || strings.HasPrefix(s, "\t") {
		if p.logKey != "" {
			p.logs[p.logKey] = append(p.logs[p.logKey], strings.TrimSpace(s))
			return
		}
	} else {
		p.logKey = ""
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return
	}
	building := p.buildOf
	p.buildOf = "" // a "# pkg" block lasts until the next line this parser knows
	switch {
	case strings.HasPrefix(t, "# "):
		// "# pdsoak/harness [pdsoak/harness.test]" or "# ./sim"
		p.buildOf, _, _ = strings.Cut(strings.TrimPrefix(t, "# "), " ")
		return
	case strings.HasPrefix(t, loadBeforePrefix):
		l := unknownLoad()
		parseLoadFields(t[len(loadBeforePrefix):], &l, false)
		p.run, p.runFrom = &l, len(p.out.Results)
	case strings.HasPrefix(t, loadAfterPrefix) && p.run != nil:
		l := *p.run
		parseLoadFields(t[len(loadAfterPrefix):], &l, true)
		for i := p.runFrom; i < len(p.out.Results); i++ {
			p.out.Results[i].Load = &l
		}
		p.run = nil
	case strings.HasPrefix(t, "pkg: "):
		p.pkg = strings.TrimSpace(strings.TrimPrefix(t, "pkg: "))
	case strings.HasPrefix(t, "goos: "), strings.HasPrefix(t, "goarch: "), strings.HasPrefix(t, "cpu: "):
		k, v, _ := strings.Cut(t, ": ")
		p.out.Env[k] = strings.TrimSpace(v)
	case strings.HasPrefix(t, "panic: ") && p.panic == "":
		p.panic = t
	case strings.HasPrefix(t, "--- FAIL: "), strings.HasPrefix(t, "--- SKIP: "):
		name, _ := splitProcs(firstField(t[len("--- FAIL: "):]))
		p.out.Failures = append(p.out.Failures, Failure{Package: p.pkg, Name: name,
			Skipped: strings.HasPrefix(t, "--- SKIP"), Line: p.n})
		p.logKey = name
	case strings.HasPrefix(t, "--- BENCH: "):
		p.logKey, _ = splitProcs(firstField(t[len("--- BENCH: "):]))
	case strings.HasPrefix(t, "ok ") || strings.HasPrefix(t, "ok\t"):
		p.endPackage(firstField(strings.TrimSpace(t[2:])))
	case strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "FAIL "):
		p.failPackage(strings.TrimSpace(t[4:]))
	case strings.HasPrefix(t, "Benchmark"):
		p.benchmark(t)
	case building != "":
		p.build[building] = append(p.build[building], t)
		p.buildOf = building
	}
}

// benchmark reads a result line, or (-v) a line that is only the benchmark's name.
func (p *parser) benchmark(t string) {
	f := strings.Fields(t)
	name, procs := splitProcs(f[0])
	if len(f) == 1 {
		p.logKey = name // -v prints the name, then what the benchmark logs
		return
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || iters < 0 || len(f)%2 != 0 {
		return
	}
	r := Result{Package: p.pkg, Name: name, Procs: procs, Iterations: iters, Metrics: map[string]float64{}, Line: p.n}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return
		}
		r.Metrics[f[i+1]] = v
	}
	p.out.Results = append(p.out.Results, r)
	p.logKey = name
}

// failPackage reads "FAIL\tpkg\t1.2s", "FAIL\tpkg [build failed]", "FAIL\t./x [setup
// failed]" or a bare "FAIL" (which ends nothing).
func (p *parser) failPackage(rest string) {
	if rest == "" {
		return
	}
	pkg := firstField(rest)
	reason := ""
	switch {
	case strings.Contains(rest, "[build failed]"):
		reason = "build failed"
	case strings.Contains(rest, "[setup failed]"):
		reason = "setup failed"
	case p.panic != "":
		reason = p.panic
	}
	if reason != "" {
		if lines := p.build[pkg]; len(lines) > 0 && p.panic == "" {
			reason += ": " + lines[0]
		}
		p.out.Failures = append(p.out.Failures, Failure{Package: pkg, Reason: reason, Line: p.n})
	} else if !p.failedSince() {
		// The test binary failed without a benchmark saying why (os.Exit, a signal).
		p.out.Failures = append(p.out.Failures, Failure{Package: pkg, Reason: "test binary failed: " + rest, Line: p.n})
	}
	p.endPackage(pkg)
}

// failedSince reports whether a benchmark of the current package already failed.
func (p *parser) failedSince() bool { return len(p.out.Failures) > p.from.failures }

// endPackage attributes the records of a package whose "pkg:" line was missing, and
// starts the next package.
func (p *parser) endPackage(pkg string) {
	if pkg != "" {
		for i := p.from.results; i < len(p.out.Results); i++ {
			if p.out.Results[i].Package == "" {
				p.out.Results[i].Package = pkg
			}
		}
		for i := p.from.failures; i < len(p.out.Failures); i++ {
			if p.out.Failures[i].Package == "" {
				p.out.Failures[i].Package = pkg
			}
		}
	}
	p.pkg, p.panic, p.logKey = "", "", ""
	p.from.results, p.from.failures = len(p.out.Results), len(p.out.Failures)
}

// fillReasons gives each benchmark failure the first line its benchmark logged.
func (p *parser) fillReasons() {
	for i := range p.out.Failures {
		f := &p.out.Failures[i]
		if f.Name == "" || f.Reason != "" {
			continue
		}
		for _, l := range p.logs[f.Name] {
			if l != "" {
				f.Reason = l
				break
			}
		}
	}
}

// splitProcs splits "BenchmarkX/sub-8" into "BenchmarkX/sub" and 8. Without a numeric
// suffix (GOMAXPROCS=1 prints none) procs is 1.
func splitProcs(s string) (string, int) {
	if i := strings.LastIndexByte(s, '-'); i > 0 {
		if n, err := strconv.Atoi(s[i+1:]); err == nil && n > 0 {
			return s[:i], n
		}
	}
	return s, 1
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}
