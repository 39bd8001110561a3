package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"pdsoak/harness/forensics"
)

// system is the machine doctor runs on.
type system struct {
	python string
	nvml   forensics.GPUSnapshot // forensics.NVMLSnapshot
}

// System is the real machine; python is the interpreter to ask ("" : python3 on PATH).
func System(python string) Probe {
	if python == "" {
		python = "python3"
	}
	return system{python: python, nvml: forensics.NVMLSnapshot}
}

func (s system) GPUs(ctx context.Context) ([]GPU, string) {
	rep, err := s.nvml(ctx)
	if err != nil {
		return nil, err.Error()
	}
	if rep.Note != "" && len(rep.Devices) == 0 {
		return nil, rep.Note
	}
	// NVML gives pids only; the command lines come from /proc.
	rep.MapProcesses("/proc", nil)
	var out []GPU
	for _, d := range rep.Devices {
		g := GPU{Index: d.Index, Name: d.Name}
		if d.MemTotal != nil {
			g.MemTotal = *d.MemTotal
		}
		if d.MemUsed != nil {
			g.MemUsed = *d.MemUsed
		}
		for _, p := range d.Processes {
			name := p.Cmdline
			if name == "" {
				name = "?"
			}
			if f := strings.Fields(name); len(f) > 0 {
				name = filepath.Base(f[0])
			}
			g.Processes = append(g.Processes, fmt.Sprintf("pid %d (%s, %d MiB)", p.PID, name, p.MemUsed>>20))
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, "NVML lists no GPU"
	}
	return out, ""
}

// pyVersion prints a distribution's version, or nothing when it is not installed.
const pyVersion = `import sys
from importlib import metadata
try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    pass
`

func (s system) PythonPackage(ctx context.Context, dist string) (string, error) {
	if _, err := exec.LookPath(s.python); err != nil {
		return "", fmt.Errorf("%s not on PATH", s.python)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.python, "-c", pyVersion, dist).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s: %s", s.python, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s: %w", s.python, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (system) LookPath(name string) (string, error) { return exec.LookPath(name) }

func (system) IsDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func (system) PortFree(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func (system) RDMADevices() []string {
	entries, err := os.ReadDir("/sys/class/infiniband")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func (system) FreeBytes(path string) (uint64, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("doctor: %w", err)
	}
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return 0, fmt.Errorf("doctor: statfs %s: %w", path, err)
		}
		p = parent
	}
}
