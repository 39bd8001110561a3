package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Status of a check.
type Status string

// Statuses: ok, missing (not ready), warn (works, but worse: said, not fatal).
const (
	OK      Status = "ok"
	Missing Status = "MISSING"
	Warn    Status = "warn"
)

// Check is one line of the report.
type Check struct {
	Name   string
	Status Status
	Detail string
	Fix    string // how to install or fix it (missing and warn)
}

// Config says what the night needs.
type Config struct {
	// Stack is sglang, vllm or both ("sglang,vllm"); "" is sglang.
	Stack string
	// Backend is the KV transfer backend: mooncake (default) or nixl.
	Backend string
	// GPUs is how many GPUs the packs need (2: prefill and decode); 0 skips the GPU check.
	GPUs int
	// ModelPath is MODEL_PATH: a local directory, or a Hugging Face id.
	ModelPath string
	// Ports must be free (nothing listening).
	Ports []int
	// Archive is the nightly archive's directory; MinFreeGiB must be free on its disk.
	Archive    string
	MinFreeGiB float64
	// NeedGH says the workflow fetches artifacts with gh here (a hosted job, not the
	// self-hosted night, which keeps its archive on disk).
	NeedGH bool
}

// GPU is one device as NVML reports it.
type GPU struct {
	Index     int
	Name      string
	MemTotal  uint64
	MemUsed   uint64
	Processes []string // "pid 1234 (python3)"
}

// Probe is the machine as doctor asks it.
type Probe interface {
	// GPUs lists the devices; note says why there is no NVML ("" when there is).
	GPUs(ctx context.Context) (gpus []GPU, note string)
	// PythonPackage is the installed version of a distribution ("" when absent) and the
	// interpreter asked, or an error when there is no interpreter.
	PythonPackage(ctx context.Context, dist string) (version string, err error)
	// LookPath finds an executable.
	LookPath(name string) (string, error)
	// IsDir says whether a local directory exists.
	IsDir(path string) bool
	// PortFree says whether 127.0.0.1:port can be bound.
	PortFree(port int) bool
	// RDMADevices lists /sys/class/infiniband.
	RDMADevices() []string
	// FreeBytes is the free space of the file system holding path (or its nearest
	// existing parent).
	FreeBytes(path string) (uint64, error)
}

// Run performs every check Config asks for.
func Run(ctx context.Context, cfg Config, p Probe) []Check {
	var out []Check
	if cfg.GPUs > 0 {
		out = append(out, gpuChecks(ctx, cfg, p)...)
	}
	for _, pkg := range packages(cfg) {
		out = append(out, pythonCheck(ctx, p, pkg))
	}
	if rdma(cfg) {
		out = append(out, rdmaCheck(p))
	}
	out = append(out, binCheck(p, "py-spy", Missing, "the forensics bundle's Python stacks: "+pipInstall("py-spy")))
	if cfg.NeedGH {
		out = append(out, binCheck(p, "gh", Missing, "https://github.com/cli/cli#installation (apt-get install gh)"))
	}
	if cfg.ModelPath != "" || stacks(cfg)["sglang"] || stacks(cfg)["vllm"] {
		out = append(out, modelCheck(p, cfg.ModelPath))
	}
	for _, port := range cfg.Ports {
		if p.PortFree(port) {
			out = append(out, Check{Name: fmt.Sprintf("port %d", port), Status: OK, Detail: "free"})
		} else {
			out = append(out, Check{Name: fmt.Sprintf("port %d", port), Status: Missing, Detail: "in use", Fix: fmt.Sprintf("stop what listens there (ss -ltnp 'sport = :%d') or set the pack's port variable", port)})
		}
	}
	if cfg.Archive != "" {
		out = append(out, diskCheck(p, cfg))
	}
	return out
}

// Ready says whether nothing is missing.
func Ready(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Missing {
			return false
		}
	}
	return true
}

// Write prints one line per check, then the verdict.
func Write(w io.Writer, checks []Check) {
	for _, c := range checks {
		line := fmt.Sprintf("%-8s %s: %s", c.Status, c.Name, c.Detail)
		if c.Fix != "" && c.Status != OK {
			line += "; fix: " + c.Fix
		}
		fmt.Fprintln(w, line)
	}
	missing := 0
	for _, c := range checks {
		if c.Status == Missing {
			missing++
		}
	}
	if missing == 0 {
		fmt.Fprintln(w, "doctor: ready")
		return
	}
	fmt.Fprintf(w, "doctor: not ready: %d missing\n", missing)
}

// packPorts are the default ports of each stack's packs (scenarios/targets/sglang-pd.yaml
// and vllm-pd.yaml): router or proxy, prefill, decode, and the bootstrap, metrics or NIXL
// side-channel ports.
var packPorts = map[string][]int{
	"sglang": {30000, 30100, 30200, 8998, 29000},
	"vllm":   {8100, 8200, 8192, 5600, 5700},
}

// DefaultPorts are the ports a night of stack (as Config.Stack) needs free.
func DefaultPorts(stack string) []int {
	st := stacks(Config{Stack: stack})
	var out []int
	for _, s := range []string{"sglang", "vllm"} {
		if st[s] {
			out = append(out, packPorts[s]...)
		}
	}
	return out
}

func stacks(cfg Config) map[string]bool {
	s := cfg.Stack
	if s == "" {
		s = "sglang"
	}
	out := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		out[strings.TrimSpace(f)] = true
	}
	return out
}

func backend(cfg Config) string {
	if cfg.Backend == "" {
		return "mooncake"
	}
	return cfg.Backend
}

// packages are the Python distributions the stack needs: SGLang's PD mode needs the
// router and the transfer backend's package; vLLM's PD (NixlConnector) needs nixl.
func packages(cfg Config) []string {
	st := stacks(cfg)
	var out []string
	if st["sglang"] {
		out = append(out, "sglang", "sglang-router")
		if backend(cfg) == "nixl" {
			out = append(out, "nixl")
		} else {
			out = append(out, "mooncake-transfer-engine")
		}
	}
	if st["vllm"] {
		out = append(out, "vllm")
		if !st["sglang"] || backend(cfg) != "nixl" {
			out = append(out, "nixl")
		}
	}
	return out
}

// rdma: mooncake moves KV over RDMA (with a TCP fallback that is far slower).
func rdma(cfg Config) bool { return stacks(cfg)["sglang"] && backend(cfg) == "mooncake" }

func gpuChecks(ctx context.Context, cfg Config, p Probe) []Check {
	gpus, note := p.GPUs(ctx)
	if note != "" {
		return []Check{{Name: "gpu", Status: Missing, Detail: "no GPU: " + note,
			Fix: "install the NVIDIA driver (it provides libnvidia-ml.so.1; check with nvidia-smi) on a machine with GPUs"}}
	}
	var out []Check
	for _, g := range gpus {
		c := Check{Name: fmt.Sprintf("gpu %d", g.Index), Status: OK,
			Detail: fmt.Sprintf("%s, %d MiB, %d MiB used, %d processes", g.Name, g.MemTotal>>20, g.MemUsed>>20, len(g.Processes))}
		if len(g.Processes) > 0 {
			c.Status, c.Detail = Warn, c.Detail+": "+strings.Join(g.Processes, ", ")
			c.Fix = "a night wants its GPUs to itself: stop these processes"
		}
		out = append(out, c)
	}
	if len(gpus) < cfg.GPUs {
		out = append(out, Check{Name: "gpus", Status: Missing, Detail: fmt.Sprintf("%d GPUs, the packs need %d (prefill and decode on separate GPUs)", len(gpus), cfg.GPUs),
			Fix: "use a runner with enough GPUs, or point PREFILL_GPU and DECODE_GPU at the same one (a smaller model)"})
	}
	return out
}

func pythonCheck(ctx context.Context, p Probe, pkg string) Check {
	v, err := p.PythonPackage(ctx, pkg)
	switch {
	case err != nil:
		return Check{Name: pkg, Status: Missing, Detail: "no Python: " + err.Error(), Fix: "install Python 3.11 (actions/setup-python) and then " + pipInstall(pkg)}
	case v == "":
		return Check{Name: pkg, Status: Missing, Detail: "not installed", Fix: pipInstall(pkg)}
	case Pins[pkg] != "" && publicVersion(v) != Pins[pkg]:
		return Check{Name: pkg, Status: Warn, Detail: fmt.Sprintf("%s installed, the nightly pins %s", v, Pins[pkg]), Fix: pipInstall(pkg)}
	}
	return Check{Name: pkg, Status: OK, Detail: v}
}

// publicVersion drops a PEP 440 local version ("+cu126" of a CUDA variant wheel), which
// pip's ==PIN accepts as the pinned version.
func publicVersion(v string) string {
	pub, _, _ := strings.Cut(v, "+")
	return pub
}

func rdmaCheck(p Probe) Check {
	devs := p.RDMADevices()
	if len(devs) == 0 {
		return Check{Name: "rdma", Status: Warn, Detail: "no RDMA device (/sys/class/infiniband is empty): mooncake falls back to TCP",
			Fix: "install the NIC's RDMA driver (rdma-core, MLNX_OFED) or use --disaggregation-transfer-backend nixl (TRANSFER_BACKEND=nixl)"}
	}
	return Check{Name: "rdma", Status: OK, Detail: strings.Join(devs, ", ")}
}

func binCheck(p Probe, name string, st Status, fix string) Check {
	path, err := p.LookPath(name)
	if err != nil {
		return Check{Name: name, Status: st, Detail: "not on PATH", Fix: fix}
	}
	return Check{Name: name, Status: OK, Detail: path}
}

func modelCheck(p Probe, model string) Check {
	switch {
	case model == "":
		return Check{Name: "model", Status: Missing, Detail: "MODEL_PATH is not set", Fix: "set MODEL_PATH (--model) to a local directory or a Hugging Face id"}
	case p.IsDir(model):
		return Check{Name: "model", Status: OK, Detail: model + " (local directory)"}
	case strings.HasPrefix(model, "/") || strings.HasPrefix(model, "."):
		return Check{Name: "model", Status: Missing, Detail: model + " does not exist", Fix: "download it there: huggingface-cli download MODEL --local-dir " + model}
	}
	return Check{Name: "model", Status: Warn, Detail: model + " is a Hugging Face id: the first launch downloads it (minutes, inside START_TIMEOUT)",
		Fix: "pre-download once: huggingface-cli download " + model}
}

func diskCheck(p Probe, cfg Config) Check {
	free, err := p.FreeBytes(cfg.Archive)
	if err != nil {
		return Check{Name: "disk", Status: Missing, Detail: err.Error(), Fix: "create the archive directory's parent"}
	}
	gib := float64(free) / (1 << 30)
	c := Check{Name: "disk", Status: OK, Detail: fmt.Sprintf("%.1f GiB free for the archive %s", gib, cfg.Archive)}
	if gib < cfg.MinFreeGiB {
		c.Status, c.Fix = Missing, fmt.Sprintf("free at least %.0f GiB, or lower --keep (nights kept)", cfg.MinFreeGiB)
	}
	return c
}
