package forensics

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noGPU is the NVML reader of tests: no driver.
func noGPU(context.Context) (*GPUReport, error) { return &GPUReport{Note: "test: no NVML"}, nil }

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST.json"))
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func item(m Manifest, file string) *Item {
	for i := range m.Items {
		if m.Items[i].File == file {
			return &m.Items[i]
		}
	}
	return nil
}

// A reference-like server: /debug/requests, pprof, /metrics; one broken endpoint and
// one that hangs. Every collector writes its file or its note; none fails the bundle.
func TestWriteCollectsAndNotesFailures(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/requests", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"requests":[{"id":"r1","stage":"prealloc"}]}`))
	})
	mux.HandleFunc("/debug/pprof/goroutine", func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "2", r.URL.Query().Get("debug"))
		w.Write([]byte("goroutine 1 [running]:\nmain.main()\n"))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(strings.Repeat("sglang:num_running_reqs 3\n", 100)))
	})
	mux.HandleFunc("/broken/debug/pprof/goroutine", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no pprof here", http.StatusNotFound)
	})
	mux.HandleFunc("/hang/metrics", func(http.ResponseWriter, *http.Request) { <-release })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	logDir := t.TempDir()
	var log strings.Builder
	for i := range 500 {
		log.WriteString("line " + string(rune('a'+i%26)) + "\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(logDir, "decode-0.log"), []byte(log.String()+"last line\n"), 0o644))

	src := Sources{
		Processes: []Process{{Name: "self", PID: os.Getpid()}, {Name: "gone", PID: 0}},
		Debug:     []Endpoint{{Process: "decode-0", URL: srv.URL + "/debug/requests"}},
		PProf:     []Endpoint{{Process: "decode-0", URL: srv.URL}, {Process: "python", URL: srv.URL + "/broken"}},
		Metrics: []Endpoint{{Process: "decode-0", URL: srv.URL + "/metrics"},
			{Process: "stuck", URL: srv.URL + "/hang/metrics"}},
		LogDir: logDir,
	}
	dir := filepath.Join(t.TempDir(), "first-drop-3s")
	m, err := Write(context.Background(), dir, "first-drop", "request r1", src, Config{
		CollectorTimeout: 300 * time.Millisecond, MaxFileBytes: 1000, LogLines: 10, GPU: noGPU})
	require.NoError(t, err)
	got := readManifest(t, dir)
	assert.Equal(t, m.Items, got.Items)
	assert.Equal(t, "first-drop", got.Trigger)

	tests := []struct {
		name, file, contains string
		failed, truncated    bool
	}{
		{"debug requests", "debug-requests/decode-0.json", `"prealloc"`, false, false},
		{"goroutine dump", "goroutines/decode-0.txt", "goroutine 1 [running]", false, false},
		{"connections of the processes", "connections.txt", "self (pid ", false, false},
		{"metrics capped", "metrics/decode-0.txt", "[forensics: truncated at 1000 bytes]", false, true},
		{"hanging endpoint: a note", "metrics/stuck.txt.error.txt", "context deadline exceeded", true, false},
		{"own proc state", "proc/self.json", `"threads"`, false, false},
		{"no pid: a note", "proc/gone.json.error.txt", "no pid", true, false},
		{"log tail", "logs/decode-0.log", "last line", false, false},
		{"nvml", "nvml.json", "test: no NVML", false, false},
		{"harness goroutines, capped", "harness-goroutines.txt", "goroutine", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it := item(got, tc.file)
			require.NotNil(t, it, "no manifest item %s in %+v", tc.file, got.Items)
			assert.Equal(t, tc.failed, it.Error != "", "error %q", it.Error)
			assert.Equal(t, tc.truncated, it.Truncated)
			b, err := os.ReadFile(filepath.Join(dir, tc.file))
			require.NoError(t, err)
			assert.Contains(t, string(b), tc.contains)
			assert.Equal(t, int64(len(b)), it.Bytes)
		})
	}
	tail, err := os.ReadFile(filepath.Join(dir, "logs/decode-0.log"))
	require.NoError(t, err)
	assert.Equal(t, 10, strings.Count(string(tail), "\n"), "the last 10 lines")
	assert.Equal(t, 2, got.Failed())
	// A server without /debug/pprof (404) is skipped quietly: one manifest line, no file,
	// not a failure.
	var skipped *Item
	for i := range got.Items {
		if got.Items[i].Collector == "goroutines" && got.Items[i].Process == "python" {
			skipped = &got.Items[i]
		}
	}
	require.NotNil(t, skipped)
	assert.Empty(t, skipped.Error)
	assert.Empty(t, skipped.File)
	assert.Contains(t, skipped.Skipped, "status 404")
	assert.NoFileExists(t, filepath.Join(dir, "goroutines/python.txt.error.txt"))
	assert.Contains(t, m.Note("forensics/first-drop-3s"), "[forensics/first-drop-3s](forensics/first-drop-3s/MANIFEST.json)")
	assert.Contains(t, m.Note("forensics/first-drop-3s"), "2 collectors failed, 1 not offered by the process")
	assert.Equal(t, "first-drop-3s", got.Dir)
}

// A collector that ignores its context is abandoned at the bundle bound, and noted.
func TestWriteBundleBound(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	slow := func(context.Context) (*GPUReport, error) { <-block; return nil, nil }
	dir := t.TempDir()
	m, err := Write(context.Background(), dir, "wedged", "", Sources{}, Config{
		CollectorTimeout: time.Hour, BundleTimeout: 200 * time.Millisecond, GPU: slow})
	require.NoError(t, err)
	it := item(*m, "nvml.json")
	require.NotNil(t, it)
	assert.Contains(t, it.Error, "not finished within the bundle bound")
	require.NotNil(t, item(*m, "harness-goroutines.txt"))
}

func TestPySpyAbsentIsANote(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	m, err := Write(context.Background(), dir, "end", "", Sources{
		Processes: []Process{{Name: "sglang-decode", PID: os.Getpid(), Python: true}}}, Config{GPU: noGPU})
	require.NoError(t, err)
	it := item(*m, "py-spy/sglang-decode.txt.error.txt")
	require.NotNil(t, it, "%+v", m.Items)
	assert.Contains(t, it.Error, "py-spy is not on PATH")
}

// A fake py-spy on PATH is run with dump --pid PID --subprocesses.
func TestPySpyRuns(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"py-spy $*\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "py-spy"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	_, err := Write(context.Background(), dir, "end", "", Sources{
		Processes: []Process{{Name: "decode", PID: os.Getpid(), Python: true}}}, Config{GPU: noGPU})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "py-spy/decode.txt"))
	require.NoError(t, err)
	assert.Equal(t, "py-spy dump --pid "+itoa(os.Getpid())+" --subprocesses\n", string(b))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestReadProcSelf(t *testing.T) {
	pi, err := ReadProc("/proc", os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, pi.Threads)
	assert.Positive(t, pi.OpenFDs)
	assert.NotEmpty(t, pi.State)
	assert.Equal(t, os.Getppid(), pi.PPID)
	require.NotEmpty(t, pi.Cmdline)
	assert.False(t, IsPython("/proc", os.Getpid()), "the test binary is not Python")
}

func TestIsPythonFromProc(t *testing.T) {
	root := t.TempDir()
	mk := func(pid, argv0 string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "cmdline"), []byte(argv0+"\x00-m\x00sglang.launch_server\x00"), 0o644))
	}
	mk("10", "/usr/bin/python3.11")
	mk("11", "/opt/bin/pdserver")
	assert.True(t, IsPython(root, 10))
	assert.False(t, IsPython(root, 11))
	assert.False(t, IsPython(root, 12))
}

// GPU processes are named after the supervised process they descend from.
func TestMapProcesses(t *testing.T) {
	root := t.TempDir()
	mk := func(pid, ppid string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "status"), []byte("Name:\tpython3\nPPid:\t"+ppid+"\n"), 0o644))
	}
	mk("100", "1")   // decode's launch_server
	mk("101", "100") // its scheduler child
	mk("102", "101") // a grandchild
	mk("200", "1")   // someone else's
	rep := &GPUReport{Devices: []GPUDevice{{Index: 0, Processes: []GPUProcess{{PID: 101}, {PID: 102}, {PID: 200}, {PID: 100}}}}}
	rep.MapProcesses(root, []Process{{Name: "decode-0", PID: 100}})
	var names []string
	for _, p := range rep.Devices[0].Processes {
		names = append(names, p.Process)
	}
	assert.Equal(t, []string{"decode-0", "decode-0", "", "decode-0"}, names)
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"fewer lines than n", "a\nb\n", 5, "a\nb\n"},
		{"last two", "a\nb\nc\n", 2, "b\nc\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"empty", "", 3, ""},
		{"one", "a\nb\n", 1, "b\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(TailLines([]byte(tc.in), tc.n)))
		})
	}
}

func TestParseStatus(t *testing.T) {
	pi := ParseStatus([]byte("Name:\tpdserver\nState:\tT (stopped)\nPPid:\t42\nVmRSS:\t  1234 kB\nThreads:\t17\n"))
	assert.Equal(t, &ProcInfo{State: "T (stopped)", PPID: 42, VmRSS: "1234 kB", Threads: 17}, pi)
}

func TestSafeName(t *testing.T) {
	assert.Equal(t, "decode-0", SafeName("decode-0"))
	assert.Equal(t, "a_b", SafeName("a/b"))
	assert.Equal(t, "_", SafeName(".."))
	assert.Equal(t, "_", SafeName(""))
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("State:\tS (sleeping)\nThreads:\t3\n"))
	f.Add([]byte("PPid:\n:::\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ParseStatus(b)
	})
}

func FuzzTailLines(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		out := TailLines(b, n)
		if !strings.HasSuffix(string(b), string(out)) {
			t.Fatalf("tail %q is not a suffix of %q", out, b)
		}
		if n > 0 && strings.Count(strings.TrimSuffix(string(out), "\n"), "\n") >= n {
			t.Fatalf("tail %q has more than %d lines", out, n)
		}
	})
}

// A real Python process is recognised from /proc and gets a py-spy dump (or, without
// py-spy on PATH, a note saying so); a Go process does not.
func TestPythonProcessGetsPySpy(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this machine")
	}
	cmd := exec.Command(py, "-c", "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(60)")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n') // the interpreter is up
	require.NoError(t, err)
	require.Equal(t, "up\n", line)

	assert.True(t, IsPython("/proc", cmd.Process.Pid))
	dir := t.TempDir()
	m, err := Write(context.Background(), dir, "end", "", Sources{Processes: []Process{
		{Name: "sglang-decode", PID: cmd.Process.Pid}, {Name: "harness", PID: os.Getpid()}}}, Config{GPU: noGPU})
	require.NoError(t, err)
	var spy []string
	for _, it := range m.Items {
		if it.Collector == "py-spy" {
			spy = append(spy, it.Process)
		}
	}
	assert.Equal(t, []string{"sglang-decode"}, spy)
	pi, err := os.ReadFile(filepath.Join(dir, "proc", "sglang-decode.json"))
	require.NoError(t, err)
	assert.Contains(t, string(pi), "time.sleep(60)")
}

// A bundle cut short by its caller (a second Ctrl-C cancels the interrupt bundle) says
// so: its unfinished collectors did not run into the 30 s bundle bound, and a collector
// that returns once cut short writes nothing the manifest does not list.
func TestWriteCutShort(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done() // answers nothing
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-arrived; cancel(errors.New("interrupted again")) }()
	dir := t.TempDir()
	m, err := Write(ctx, dir, "interrupt", "", Sources{Debug: []Endpoint{{Process: "p", URL: srv.URL}}}, Config{GPU: noGPU})
	require.NoError(t, err)
	it := item(*m, "debug-requests/p.json")
	require.NotNil(t, it, "%+v", m.Items)
	assert.NotContains(t, it.Error, "bundle bound")
	assert.Contains(t, it.Error, "cut short: interrupted again")
}
