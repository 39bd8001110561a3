package forensics

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// GPUReport is nvml.json: every GPU and the processes on it.
type GPUReport struct {
	Note    string      `json:"note,omitempty"` // why there is nothing (no driver)
	Devices []GPUDevice `json:"devices,omitempty"`
}

// GPUDevice is one GPU.
type GPUDevice struct {
	Index     int          `json:"index"`
	Name      string       `json:"name,omitempty"`
	UUID      string       `json:"uuid,omitempty"`
	Util      *uint32      `json:"util_percent,omitempty"`
	MemUsed   *uint64      `json:"mem_used_bytes,omitempty"`
	MemTotal  *uint64      `json:"mem_total_bytes,omitempty"`
	Processes []GPUProcess `json:"processes,omitempty"`
	Errors    []string     `json:"errors,omitempty"`
}

// GPUProcess is one process on a GPU; Process names the supervised process it is, or
// descends from.
type GPUProcess struct {
	PID       uint32  `json:"pid"`
	Process   string  `json:"process,omitempty"`
	MemUsed   uint64  `json:"mem_used_bytes"`
	SMUtil    *uint32 `json:"sm_util_percent,omitempty"`
	MemUtil   *uint32 `json:"mem_util_percent,omitempty"`
	Cmdline   string  `json:"cmdline,omitempty"`
	Ancestors []int   `json:"-"`
}

// MapProcesses names each GPU process after the supervised process it is or descends
// from (walking /proc parents: SGLang's GPU work runs in child processes).
func (r *GPUReport) MapProcesses(root string, procs []Process) {
	byPID := map[int]string{}
	for _, p := range procs {
		if p.PID > 0 {
			byPID[p.PID] = p.Name
		}
	}
	for i := range r.Devices {
		for j := range r.Devices[i].Processes {
			gp := &r.Devices[i].Processes[j]
			if gp.Cmdline == "" {
				if cl, err := os.ReadFile(filepath.Join(root, strconv.Itoa(int(gp.PID)), "cmdline")); err == nil {
					gp.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
				}
			}
			pid := int(gp.PID)
			for hop := 0; hop < 32 && pid > 1; hop++ {
				if name, ok := byPID[pid]; ok {
					gp.Process = name
					break
				}
				pid = parentPID(root, pid)
			}
		}
	}
}

// parentPID reads PPid from /proc/<pid>/status (0 when unknown).
func parentPID(root string, pid int) int {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	return ParseStatus(b).PPID
}
