package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/forensics"
)

// fakeProbe is a machine described by its fields.
type fakeProbe struct {
	gpus    []GPU
	gpuNote string
	python  map[string]string // dist -> version
	noPy    bool
	bins    map[string]bool
	dirs    map[string]bool
	busy    map[int]bool
	rdma    []string
	free    uint64
}

func (f fakeProbe) GPUs(context.Context) ([]GPU, string) { return f.gpus, f.gpuNote }
func (f fakeProbe) PythonPackage(_ context.Context, d string) (string, error) {
	if f.noPy {
		return "", errors.New("python3 not on PATH")
	}
	return f.python[d], nil
}
func (f fakeProbe) LookPath(n string) (string, error) {
	if f.bins[n] {
		return "/usr/bin/" + n, nil
	}
	return "", errors.New("not found")
}
func (f fakeProbe) IsDir(p string) bool              { return f.dirs[p] }
func (f fakeProbe) PortFree(p int) bool              { return !f.busy[p] }
func (f fakeProbe) RDMADevices() []string            { return f.rdma }
func (f fakeProbe) FreeBytes(string) (uint64, error) { return f.free, nil }

func ready() fakeProbe {
	py := map[string]string{}
	for k, v := range Pins {
		py[k] = v
	}
	return fakeProbe{
		gpus:   []GPU{{Index: 0, Name: "NVIDIA H100", MemTotal: 80 << 30}, {Index: 1, Name: "NVIDIA H100", MemTotal: 80 << 30}},
		python: py, bins: map[string]bool{"py-spy": true, "gh": true}, dirs: map[string]bool{"/models/q": true},
		rdma: []string{"mlx5_0"}, free: 100 << 30,
	}
}

var cfg = Config{Stack: "sglang", Backend: "mooncake", GPUs: 2, ModelPath: "/models/q", Ports: []int{30000}, Archive: "/a", MinFreeGiB: 20}

func statuses(cs []Check) map[string]Status {
	out := map[string]Status{}
	for _, c := range cs {
		out[c.Name] = c.Status
	}
	return out
}

func TestDoctor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		probe  func(*fakeProbe)
		ready  bool
		expect map[string]Status
		fix    string // a line's fix must say this
	}{
		{name: "ready runner", cfg: cfg, probe: func(*fakeProbe) {}, ready: true,
			expect: map[string]Status{"gpu 0": OK, "gpu 1": OK, "sglang": OK, "sglang-router": OK, "mooncake-transfer-engine": OK, "rdma": OK, "py-spy": OK, "model": OK, "port 30000": OK, "disk": OK}},
		{name: "no GPU, no SGLang (this machine)", cfg: cfg, probe: func(p *fakeProbe) {
			p.gpus, p.gpuNote, p.python = nil, "no GPU telemetry: NVML init: ERROR_LIBRARY_NOT_FOUND", map[string]string{}
		}, expect: map[string]Status{"gpu": Missing, "sglang": Missing, "sglang-router": Missing, "mooncake-transfer-engine": Missing}, fix: `pip install "sglang[all]==` + Pins["sglang"] + `"`},
		{name: "one GPU", cfg: cfg, probe: func(p *fakeProbe) { p.gpus = p.gpus[:1] }, expect: map[string]Status{"gpus": Missing}},
		{name: "a GPU in use warns", cfg: cfg, probe: func(p *fakeProbe) { p.gpus[1].Processes = []string{"pid 7 (python3, 100 MiB)"} }, ready: true, expect: map[string]Status{"gpu 1": Warn}},
		{name: "another version warns", cfg: cfg, probe: func(p *fakeProbe) { p.python["sglang"] = "0.4.10" }, ready: true, expect: map[string]Status{"sglang": Warn}},
		{name: "nixl backend", cfg: Config{Backend: "nixl"}, probe: func(p *fakeProbe) { delete(p.python, "nixl") }, expect: map[string]Status{"nixl": Missing}, fix: `pip install "nixl==` + Pins["nixl"] + `"`},
		{name: "vllm stack", cfg: Config{Stack: "vllm", ModelPath: "/models/q"}, probe: func(p *fakeProbe) {}, ready: true, expect: map[string]Status{"vllm": OK, "nixl": OK}},
		// A CUDA variant wheel (vLLM's +cu126 builds) is the pinned version: pip's ==PIN
		// accepts it, so doctor must not warn and tell to reinstall it.
		{name: "local version of the pin", cfg: Config{Stack: "vllm", ModelPath: "/models/q"}, probe: func(p *fakeProbe) { p.python["vllm"] = Pins["vllm"] + "+cu126" }, ready: true, expect: map[string]Status{"vllm": OK}},
		{name: "no python", cfg: Config{}, probe: func(p *fakeProbe) { p.noPy = true }, expect: map[string]Status{"sglang": Missing}, fix: "install Python 3.11"},
		{name: "no RDMA warns", cfg: cfg, probe: func(p *fakeProbe) { p.rdma = nil }, ready: true, expect: map[string]Status{"rdma": Warn}},
		{name: "busy port", cfg: cfg, probe: func(p *fakeProbe) { p.busy = map[int]bool{30000: true} }, expect: map[string]Status{"port 30000": Missing}},
		{name: "missing model dir", cfg: Config{ModelPath: "/models/none"}, probe: func(*fakeProbe) {}, expect: map[string]Status{"model": Missing}},
		{name: "HF id warns", cfg: Config{ModelPath: "Qwen/Qwen2.5-0.5B-Instruct"}, probe: func(*fakeProbe) {}, ready: true, expect: map[string]Status{"model": Warn}, fix: "huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct"},
		{name: "full disk", cfg: cfg, probe: func(p *fakeProbe) { p.free = 1 << 30 }, expect: map[string]Status{"disk": Missing}},
		{name: "gh when asked", cfg: Config{NeedGH: true, ModelPath: "/models/q"}, probe: func(p *fakeProbe) { p.bins["gh"] = false }, expect: map[string]Status{"gh": Missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ready()
			tc.probe(&p)
			checks := Run(context.Background(), tc.cfg, p)
			got := statuses(checks)
			for name, want := range tc.expect {
				assert.Equal(t, want, got[name], name)
			}
			assert.Equal(t, tc.ready, Ready(checks))
			var out bytes.Buffer
			Write(&out, checks)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, len(checks)+1, "one line per check and the verdict")
			for _, c := range checks {
				if c.Status == Missing {
					assert.NotEmpty(t, c.Fix, "%s: a missing thing says how to fix it", c.Name)
				}
			}
			if tc.fix != "" {
				assert.Contains(t, out.String(), tc.fix)
			}
			assert.Equal(t, map[bool]string{true: "doctor: ready", false: "doctor: not ready"}[tc.ready], lines[len(lines)-1][:len(map[bool]string{true: "doctor: ready", false: "doctor: not ready"}[tc.ready])])
		})
	}
}

// TestSystemProbeHere runs the real probe on this machine: it must answer every check
// (whatever the machine has) without error lines for the disk and ports.
func TestSystemProbeHere(t *testing.T) {
	checks := Run(context.Background(), Config{GPUs: 2, ModelPath: t.TempDir(), Ports: []int{0}, Archive: t.TempDir(), MinFreeGiB: 0}, System(""))
	got := statuses(checks)
	assert.Equal(t, OK, got["model"])
	assert.Equal(t, OK, got["disk"])
	assert.Contains(t, got, "sglang")
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		assert.Equal(t, Missing, got["gpu"], "no GPU here: said")
	}
}

var workflowPin = regexp.MustCompile(`(?m)^  ([A-Z_]+)_VERSION: "([^"]+)"$`)

// TestWorkflowPinsMatchDoctor: the nightly workflow installs exactly the versions doctor
// cites, and docs/gpu-runners.md's table names them.
func TestWorkflowPinsMatchDoctor(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".github", "workflows", "nightly-gpu-soak.yml"))
	require.NoError(t, err)
	names := map[string]string{"SGLANG": "sglang", "SGLANG_ROUTER": "sglang-router", "MOONCAKE": "mooncake-transfer-engine", "NIXL": "nixl", "PY_SPY": "py-spy"}
	found := map[string]string{}
	for _, m := range workflowPin.FindAllStringSubmatch(string(data), -1) {
		pkg, ok := names[m[1]]
		require.True(t, ok, "unknown pin %s_VERSION", m[1])
		found[pkg] = m[2]
	}
	for _, pkg := range names {
		assert.Equal(t, Pins[pkg], found[pkg], "%s: workflow vs doctor.Pins", pkg)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "gpu-runners.md"))
	require.NoError(t, err)
	for pkg, v := range Pins {
		assert.Regexp(t, "`"+regexp.QuoteMeta(pkg)+`(\[all\])?`+"` \\| "+regexp.QuoteMeta(v)+" \\|", string(doc), "%s in the docs' table", pkg)
	}
}

// A GPU process is named by its command (doctor tells the user what to stop), not "?":
// NVML gives only its pid.
func TestSystemGPUsNameTheirProcesses(t *testing.T) {
	snap := func(context.Context) (*forensics.GPUReport, error) {
		return &forensics.GPUReport{Devices: []forensics.GPUDevice{{Index: 0, Name: "NVIDIA H200",
			Processes: []forensics.GPUProcess{{PID: uint32(os.Getpid()), MemUsed: 2 << 20}}}}}, nil
	}
	gpus, note := system{python: "python3", nvml: snap}.GPUs(context.Background())
	require.Empty(t, note)
	require.Len(t, gpus, 1)
	require.Len(t, gpus[0].Processes, 1)
	self := filepath.Base(os.Args[0])
	assert.Equal(t, fmt.Sprintf("pid %d (%s, 2 MiB)", os.Getpid(), self), gpus[0].Processes[0])
}
