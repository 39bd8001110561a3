//go:build cgo && linux

package harness

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/gpu"
	"pdsoak/ledger"
)

func mockGPU(util uint32) *mock.Device {
	return &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-x", nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: util}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Used: 1, Total: 2}, nvml.SUCCESS },
		GetPowerUsageFunc: func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			return 40, nvml.SUCCESS
		},
	}
}

func mockLib(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return initRet },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
}

// The GPU sampler writes sample events with both devices' readings and the in-flight
// count until its context ends, and the ledger's reports see them.
func TestGPUSamplerLedger(t *testing.T) {
	lib := mockLib(nvml.SUCCESS, mockGPU(0), mockGPU(55))
	s, err := gpu.New(lib)
	require.NoError(t, err)
	assert.Equal(t, []string{"NVIDIA H200", "NVIDIA H200"}, s.Names())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan struct{}, 100)
	path := filepath.Join(t.TempDir(), "events.jsonl")
	led, err := ledger.Create(path, func(e ledger.Event) {
		if e.Source == ledger.GPUSource {
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		gpuSampler(ctx, s, led, slog.New(slog.DiscardHandler), func() int { return 7 }, time.Millisecond)
	}()
	for range 3 {
		select {
		case <-seen:
		case <-time.After(30 * time.Second):
			t.Fatal("no GPU sample within 30s")
		}
	}
	cancel()
	<-done
	require.NoError(t, s.Close())
	require.NoError(t, led.Close())
	assert.Len(t, lib.ShutdownCalls(), 1, "Shutdown calls")

	evs, _, err := ledger.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(evs), 3)
	for _, e := range evs {
		require.Equal(t, ledger.EventSample, e.Type)
		require.Equal(t, ledger.GPUSource, e.Source)
		require.Len(t, e.GPUs, 2)
		assert.Equal(t, 7, e.InFlight)
		require.NotNil(t, e.GPUs[0].Util)
		require.NotNil(t, e.GPUs[1].Util)
		assert.Zero(t, *e.GPUs[0].Util)
		assert.Equal(t, 55.0, *e.GPUs[1].Util)
		assert.Nil(t, e.GPUs[1].PowerW)
	}
}

// A machine with NVIDIA device nodes and no usable NVML gets a note (the CLI prints
// notes); a machine without such nodes, or with working telemetry, does not.
func TestNVIDIANote(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia0"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidiactl"), nil, 0o644))
	withDevices := filepath.Join(dir, "nvidia*")
	noDevices := filepath.Join(dir, "absent*")
	tests := []struct {
		name     string
		initRet  nvml.Return
		glob     string
		wantNote string // "" for none
	}{
		{"no library, devices present", nvml.ERROR_LIBRARY_NOT_FOUND, withDevices, "NVML library (libnvidia-ml.so.1, part of the NVIDIA driver) was not found"},
		{"driver not loaded, devices present", nvml.ERROR_DRIVER_NOT_LOADED, withDevices, "driver is not loaded"},
		{"no library, no devices", nvml.ERROR_LIBRARY_NOT_FOUND, noDevices, ""},
		{"telemetry works", nvml.SUCCESS, withDevices, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := gpu.New(mockLib(tt.initRet, mockGPU(0)))
			require.NoError(t, err)
			defer s.Close()
			note, ok := nvidiaNote(s, tt.glob)
			if tt.wantNote == "" {
				assert.False(t, ok, "note %q", note)
				return
			}
			require.True(t, ok)
			assert.Contains(t, note, tt.wantNote)
			assert.Contains(t, note, filepath.Join(dir, "nvidia0"))
		})
	}
}
