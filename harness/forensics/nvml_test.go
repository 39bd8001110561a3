//go:build cgo && linux

package forensics

import (
	"context"
	"os"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nvmlLibOf(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return initRet },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

// Two GPUs, prefill on 0 and decode on 1, decode's work in a child process: the
// snapshot lists each GPU's processes with memory and SM utilisation, named after the
// launched process.
func TestNVMLSnapshotMapsProcesses(t *testing.T) {
	dev := func(name string, util uint32, procs []nvml.ProcessInfo, samples []nvml.ProcessUtilizationSample, utilRet nvml.Return) *mock.Device {
		return &mock.Device{
			GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
			GetUUIDFunc: func() (string, nvml.Return) { return "GPU-" + name, nvml.SUCCESS },
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: util}, nvml.SUCCESS
			},
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Used: 70 << 30, Total: 80 << 30}, nvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS },
			GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
				return samples, utilRet
			},
		}
	}
	lib := nvmlLibOf(nvml.SUCCESS,
		dev("H100-a", 0, []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 60 << 30}}, nil, nvml.ERROR_NOT_FOUND),
		dev("H100-b", 3, []nvml.ProcessInfo{{Pid: 201, UsedGpuMemory: 65 << 30}},
			[]nvml.ProcessUtilizationSample{{Pid: 201, SmUtil: 3, MemUtil: 1}}, nvml.SUCCESS),
	)
	rep, err := snapshotNVML(context.Background(), lib)
	require.NoError(t, err)
	require.Len(t, rep.Devices, 2)

	root := t.TempDir()
	for pid, ppid := range map[string]string{"100": "1", "200": "1", "201": "200"} {
		require.NoError(t, os.MkdirAll(root+"/"+pid, 0o755))
		require.NoError(t, os.WriteFile(root+"/"+pid+"/status", []byte("PPid:\t"+ppid+"\n"), 0o644))
	}
	rep.MapProcesses(root, []Process{{Name: "prefill-0", PID: 100}, {Name: "decode-0", PID: 200}})

	a, b := rep.Devices[0], rep.Devices[1]
	assert.Empty(t, a.Errors, "no utilisation sample yet is not an error")
	require.Len(t, a.Processes, 1)
	assert.Equal(t, "prefill-0", a.Processes[0].Process)
	assert.Equal(t, uint64(60<<30), a.Processes[0].MemUsed)
	assert.Nil(t, a.Processes[0].SMUtil)
	require.Len(t, b.Processes, 1)
	assert.Equal(t, "decode-0", b.Processes[0].Process)
	require.NotNil(t, b.Processes[0].SMUtil)
	assert.Equal(t, uint32(3), *b.Processes[0].SMUtil)
	require.NotNil(t, b.Util)
	assert.Equal(t, uint32(3), *b.Util)
}

func TestNVMLSnapshotWithoutDriver(t *testing.T) {
	tests := []struct {
		name    string
		ret     nvml.Return
		wantErr bool
	}{
		{"no library", nvml.ERROR_LIBRARY_NOT_FOUND, false},
		{"driver not loaded", nvml.ERROR_DRIVER_NOT_LOADED, false},
		{"other init failure", nvml.ERROR_NO_PERMISSION, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := snapshotNVML(context.Background(), nvmlLibOf(tc.ret))
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, rep.Note, "no GPU telemetry")
		})
	}
}
