//go:build cgo && linux

package forensics

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLSnapshot reads the system's NVML (libnvidia-ml.so.1, loaded at run time). A
// machine without a driver gets a report with a Note, not an error.
func NVMLSnapshot(ctx context.Context) (*GPUReport, error) { return snapshotNVML(ctx, nvml.New()) }

// nvmlLib is the part of NVML the snapshot uses (go-nvml's mock.Interface in tests).
type nvmlLib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
}

func snapshotNVML(_ context.Context, lib nvmlLib) (*GPUReport, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_NOT_FOUND:
			return &GPUReport{Note: "no GPU telemetry: NVML init: " + ret.Error()}, nil
		}
		return nil, fmt.Errorf("forensics: nvml init: %w", ret)
	}
	defer lib.Shutdown()
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("forensics: nvml device count: %w", ret)
	}
	rep := &GPUReport{}
	if n == 0 {
		rep.Note = "NVML found no GPU"
	}
	for i := range n {
		d := GPUDevice{Index: i}
		fail := func(what string, ret nvml.Return) { d.Errors = append(d.Errors, what+": "+ret.Error()) }
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			fail("handle", ret)
			rep.Devices = append(rep.Devices, d)
			continue
		}
		if s, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = s
		}
		if s, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = s
		}
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			d.Util = &u.Gpu
		} else {
			fail("utilization", ret)
		}
		if m, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemUsed, d.MemTotal = &m.Used, &m.Total
		} else {
			fail("memory", ret)
		}
		procs, ret := h.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			fail("compute processes", ret)
		}
		for _, p := range procs {
			d.Processes = append(d.Processes, GPUProcess{PID: p.Pid, MemUsed: p.UsedGpuMemory})
		}
		// Per-process utilisation over the last samples NVML keeps (0: all it has).
		if us, ret := h.GetProcessUtilization(0); ret == nvml.SUCCESS {
			for _, u := range us {
				for k := range d.Processes {
					if d.Processes[k].PID == u.Pid {
						sm, mem := u.SmUtil, u.MemUtil
						d.Processes[k].SMUtil, d.Processes[k].MemUtil = &sm, &mem
					}
				}
			}
		} else if ret != nvml.ERROR_NOT_FOUND { // NOT_FOUND: no sample since the last read
			fail("process utilization", ret)
		}
		rep.Devices = append(rep.Devices, d)
	}
	return rep, nil
}
