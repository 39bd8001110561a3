package forensics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
)

// plan lists the collectors of a bundle.
func plan(src Sources, cfg Config) []job {
	var jobs []job
	for _, e := range src.Debug {
		jobs = append(jobs, job{"debug-requests", e.Process, "debug-requests/" + SafeName(e.Process) + ".json",
			httpGet(cfg, e.URL)})
	}
	for _, e := range src.PProf {
		u := strings.TrimSuffix(e.URL, "/") + "/debug/pprof/goroutine?debug=2"
		jobs = append(jobs, job{"goroutines", e.Process, "goroutines/" + SafeName(e.Process) + ".txt", httpGet(cfg, u)})
	}
	for _, e := range src.Metrics {
		jobs = append(jobs, job{"metrics", e.Process, "metrics/" + SafeName(e.Process) + ".txt", httpGet(cfg, e.URL)})
	}
	for _, p := range src.Processes {
		jobs = append(jobs, job{"proc", p.Name, "proc/" + SafeName(p.Name) + ".json",
			func(context.Context) ([]byte, error) { return procJSON(cfg.ProcRoot, p.PID) }})
		if p.Python || IsPython(cfg.ProcRoot, p.PID) {
			jobs = append(jobs, job{"py-spy", p.Name, "py-spy/" + SafeName(p.Name) + ".txt",
				func(ctx context.Context) ([]byte, error) { return pySpy(ctx, cfg.PySpy, p.PID) }})
		}
	}
	if len(src.Processes) > 0 {
		// Which leg has no bound (conns.go): every process's TCP connections mapped to
		// the process at the other end; the harness is one of them (its requests).
		procs := append(append([]Process(nil), src.Processes...), Process{Name: "harness", PID: os.Getpid()})
		jobs = append(jobs, job{"connections", "", "connections.txt", func(context.Context) ([]byte, error) {
			return FormatConnections(Connections(cfg.ProcRoot, procs)), nil
		}})
	}
	if src.LogDir != "" {
		ents, err := os.ReadDir(src.LogDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			jobs = append(jobs, job{"logs", "", "logs", func(context.Context) ([]byte, error) {
				return nil, fmt.Errorf("forensics: logs: %w", err)
			}})
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			path := filepath.Join(src.LogDir, e.Name())
			jobs = append(jobs, job{"logs", strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())), "logs/" + SafeName(e.Name()),
				func(context.Context) ([]byte, error) { return TailFile(path, cfg.LogLines, cfg.MaxFileBytes) }})
		}
	}
	procs := src.Processes
	jobs = append(jobs, job{"nvml", "", "nvml.json", func(ctx context.Context) ([]byte, error) {
		rep, err := cfg.GPU(ctx)
		if err != nil {
			return nil, err
		}
		if rep == nil {
			return nil, fmt.Errorf("forensics: nvml: no report")
		}
		rep.MapProcesses(cfg.ProcRoot, procs)
		return json.MarshalIndent(rep, "", "  ")
	}})
	jobs = append(jobs, job{"harness-goroutines", "harness", "harness-goroutines.txt", func(context.Context) ([]byte, error) {
		var b bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
			return nil, fmt.Errorf("forensics: goroutine dump: %w", err)
		}
		return b.Bytes(), nil
	}})
	return jobs
}

// httpGet fetches url; a status other than 200 is an error (the body goes into the note).
func httpGet(cfg Config, url string) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("forensics: %w", err)
		}
		resp, err := cfg.HTTP.Do(req)
		if err != nil {
			return nil, fmt.Errorf("forensics: GET %s: %w", url, err)
		}
		defer resp.Body.Close()
		// One byte over the cap lets the writer see the file was cut.
		body, err := io.ReadAll(io.LimitReader(resp.Body, cfg.MaxFileBytes+1))
		if err != nil {
			return body, fmt.Errorf("forensics: GET %s: read: %w", url, err)
		}
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			// A third-party server without /debug/pprof or /debug/requests: not a failure.
			return nil, fmt.Errorf("forensics: GET %s: status %d: %w", url, resp.StatusCode, ErrNotOffered)
		}
		if resp.StatusCode != http.StatusOK {
			return body, fmt.Errorf("forensics: GET %s: status %d", url, resp.StatusCode)
		}
		return body, nil
	}
}

// ProcInfo is a process's state as /proc shows it.
type ProcInfo struct {
	PID     int      `json:"pid"`
	State   string   `json:"state"` // /proc/<pid>/status State:, e.g. "S (sleeping)"
	Threads int      `json:"threads"`
	OpenFDs int      `json:"open_fds"`
	PPID    int      `json:"ppid"`
	VmRSS   string   `json:"vm_rss,omitempty"`
	Cmdline []string `json:"cmdline"`
	Exe     string   `json:"exe,omitempty"`
	// Children are the pids whose parent is this process (SGLang's schedulers run in
	// child processes).
	Children []int `json:"children,omitempty"`
}

// ReadProc reads pid's /proc entries.
func ReadProc(root string, pid int) (*ProcInfo, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("forensics: proc: no pid (the process is not running)")
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return nil, fmt.Errorf("forensics: proc: %w", err)
	}
	pi := ParseStatus(status)
	pi.PID = pid
	if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
		pi.Cmdline = strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")
	}
	if fds, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		pi.OpenFDs = len(fds)
	} else {
		pi.OpenFDs = -1
	}
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
		pi.Exe = exe
	}
	pi.Children = children(root, pid)
	return pi, nil
}

// ParseStatus reads the fields of /proc/<pid>/status the bundle keeps.
func ParseStatus(b []byte) *ProcInfo {
	pi := &ProcInfo{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			pi.State = v
		case "Threads":
			pi.Threads, _ = strconv.Atoi(v)
		case "PPid":
			pi.PPID, _ = strconv.Atoi(v)
		case "VmRSS":
			pi.VmRSS = v
		}
	}
	return pi
}

func procJSON(root string, pid int) ([]byte, error) {
	pi, err := ReadProc(root, pid)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(pi, "", "  ")
}

// children lists the pids whose parent is pid (from /proc/<pid>/task/*/children).
func children(root string, pid int) []int {
	files, _ := filepath.Glob(filepath.Join(root, strconv.Itoa(pid), "task", "*", "children"))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

// IsPython says whether pid runs a Python interpreter (its exe or argv[0]).
func IsPython(root string, pid int) bool {
	if pid <= 0 {
		return false
	}
	dir := filepath.Join(root, strconv.Itoa(pid))
	if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && strings.HasPrefix(filepath.Base(exe), "python") {
		return true
	}
	cl, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(cl), "\x00")
	return strings.HasPrefix(filepath.Base(argv0), "python")
}

// pySpy runs `py-spy dump --pid PID --subprocesses` (SGLang's scheduler and detokenizer
// are child processes).
func pySpy(ctx context.Context, bin string, pid int) ([]byte, error) {
	if bin == "" {
		p, err := exec.LookPath("py-spy")
		if err != nil {
			return nil, fmt.Errorf("forensics: py-spy is not on PATH (pip install py-spy; it needs ptrace, see docs/gpu-runners.md)")
		}
		bin = p
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "dump", "--pid", strconv.Itoa(pid), "--subprocesses")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("forensics: py-spy dump --pid %d: %w", pid, err)
	}
	return out.Bytes(), nil
}

// TailFile returns the last n lines of path, reading at most limit bytes from its end.
func TailFile(path string, n int, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("forensics: log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("forensics: log: %w", err)
	}
	off := max(st.Size()-limit, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, fmt.Errorf("forensics: log: %w", err)
	}
	return TailLines(b, n), nil
}

// TailLines returns the last n lines of b.
func TailLines(b []byte, n int) []byte {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	i := end
	for seen := 0; i > 0; i-- {
		if b[i-1] == '\n' {
			seen++
			if seen == n {
				break
			}
		}
	}
	return b[i:]
}
