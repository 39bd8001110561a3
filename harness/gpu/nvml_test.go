//go:build cgo && linux

package gpu

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// fakeDevice is a mock.Device answering every call the sampler makes.
func fakeDevice(name, uuid string, util, memUtil uint32, used, total uint64, mw, temp uint32) *mock.Device {
	return &mock.Device{
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: util, Memory: memUtil}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Used: used, Total: total, Free: total - used}, nvml.SUCCESS
		},
		GetPowerUsageFunc: func() (uint32, nvml.Return) { return mw, nvml.SUCCESS },
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return temp, nvml.SUCCESS
		},
	}
}

// fakeLib is a mock.Interface over devs whose Init returns initRet.
func fakeLib(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
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

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name      string
		lib       *mock.Interface
		status    string // in Status()
		wantErr   error  // nil: informational, no error
		shutdowns int
	}{
		{name: "no library", lib: fakeLib(nvml.ERROR_LIBRARY_NOT_FOUND), status: "libnvidia-ml.so.1, part of the NVIDIA driver) was not found"},
		{name: "no driver", lib: fakeLib(nvml.ERROR_DRIVER_NOT_LOADED), status: "driver is not loaded"},
		{name: "no devices", lib: fakeLib(nvml.SUCCESS), status: "found no GPU", shutdowns: 1},
		{name: "count says no GPU", lib: func() *mock.Interface {
			l := fakeLib(nvml.SUCCESS)
			l.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_GPU_NOT_FOUND }
			return l
		}(), status: "found no GPU", shutdowns: 1},
		{name: "no permission is an error, still not fatal", lib: fakeLib(nvml.ERROR_NO_PERMISSION),
			status: "ERROR_NO_PERMISSION", wantErr: nvml.ERROR_NO_PERMISSION},
		{name: "count fails", lib: func() *mock.Interface {
			l := fakeLib(nvml.SUCCESS)
			l.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
			return l
		}(), status: "device count", wantErr: nvml.ERROR_UNKNOWN, shutdowns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.lib)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Regexp(t, "^gpu: ", err.Error(), "the error names its package")
			}
			require.NotNil(t, s)
			require.False(t, s.Available(), "want an unavailable sampler")
			assert.Contains(t, s.Status(), tt.status)
			assert.Regexp(t, "^no GPU telemetry: ", s.Status())
			assert.Nil(t, s.Names())
			gs, err := s.Sample()
			assert.Nil(t, gs)
			assert.NoError(t, err)
			assert.NoError(t, s.Close())
			assert.Len(t, tt.lib.InitCalls(), 1, "Init calls")
			assert.Len(t, tt.lib.ShutdownCalls(), tt.shutdowns, "Shutdown calls")
		})
	}
}

func TestTwoDevices(t *testing.T) {
	lib := fakeLib(nvml.SUCCESS,
		fakeDevice("NVIDIA H200", "GPU-0000", 0, 0, 70<<30, 141<<30, 75_500, 31),
		fakeDevice("NVIDIA H200", "GPU-1111", 97, 40, 120<<30, 141<<30, 690_000, 64))
	s, err := New(lib)
	require.NoError(t, err)
	require.True(t, s.Available())
	assert.Equal(t, "GPU telemetry: 2 devices: 0: NVIDIA H200 GPU-0000; 1: NVIDIA H200 GPU-1111", s.Status())
	assert.Equal(t, []string{"NVIDIA H200", "NVIDIA H200"}, s.Names())
	want := []ledger.GPU{
		{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0000", Util: ptr(0.0), MemUtil: ptr(0.0),
			MemUsed: ptr(uint64(70 << 30)), MemTotal: ptr(uint64(141 << 30)), PowerW: ptr(75.5), TempC: ptr(31.0)},
		{Index: 1, Name: "NVIDIA H200", UUID: "GPU-1111", Util: ptr(97.0), MemUtil: ptr(40.0),
			MemUsed: ptr(uint64(120 << 30)), MemTotal: ptr(uint64(141 << 30)), PowerW: ptr(690.0), TempC: ptr(64.0)},
	}
	for round := range 3 {
		gs, err := s.Sample()
		require.NoError(t, err, "round %d", round)
		assertReadings(t, gs, want)
	}
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	gs, err := s.Sample()
	assert.Nil(t, gs, "Sample after Close")
	assert.NoError(t, err, "Sample after Close")
	assert.Len(t, lib.InitCalls(), 1, "Init calls")
	assert.Len(t, lib.ShutdownCalls(), 1, "Shutdown calls")
	assert.Len(t, lib.DeviceGetHandleByIndexCalls(), 2, "handles are asked once per device")
}

func TestFailingCalls(t *testing.T) {
	d0 := fakeDevice("A", "GPU-a", 10, 5, 1, 2, 1000, 40)
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	d1 := fakeDevice("B", "GPU-b", 20, 6, 1, 2, 2000, 50)
	d1.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d1.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	lib := fakeLib(nvml.SUCCESS, d0, d1)
	s, err := New(lib)
	require.NoError(t, err)
	defer s.Close()
	assert.Contains(t, s.Status(), "1: B (uuid: ERROR_NOT_SUPPORTED)", "the status names the failed uuid read")

	gs, err := s.Sample()
	require.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)
	require.ErrorIs(t, err, nvml.ERROR_NOT_SUPPORTED)
	assert.Contains(t, err.Error(), "gpu: device 0 utilization: ERROR_GPU_IS_LOST", "the error says which device and field")
	want := []ledger.GPU{
		{Index: 0, Name: "A", UUID: "GPU-a", MemUsed: ptr(uint64(1)), MemTotal: ptr(uint64(2)), PowerW: ptr(1.0), TempC: ptr(40.0),
			Errors: []string{"utilization: ERROR_GPU_IS_LOST"}},
		{Index: 1, Name: "B", Util: ptr(20.0), MemUtil: ptr(6.0), MemUsed: ptr(uint64(1)), MemTotal: ptr(uint64(2)), TempC: ptr(50.0),
			Errors: []string{"power: ERROR_NOT_SUPPORTED"}},
	}
	assertReadings(t, gs, want)

	// Next sample: an unsupported field is not asked again, a lost GPU is.
	gs, err = s.Sample()
	require.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)
	assert.NotErrorIs(t, err, nvml.ERROR_NOT_SUPPORTED)
	want[1].Errors = nil
	assertReadings(t, gs, want)
	assert.Len(t, d1.GetPowerUsageCalls(), 1, "unsupported power is asked once")
	assert.Len(t, d1.GetUUIDCalls(), 1, "unsupported uuid is asked once")
	assert.Len(t, d0.GetUtilizationRatesCalls(), 2, "the lost GPU's utilization is asked every sample")
}

func TestHandleRetried(t *testing.T) {
	d := fakeDevice("A", "GPU-a", 1, 1, 1, 2, 1, 1)
	lib := fakeLib(nvml.SUCCESS, d)
	fails := 2
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if fails > 0 {
			fails--
			return nil, nvml.ERROR_UNKNOWN
		}
		return d, nvml.SUCCESS
	}
	s, err := New(lib)
	require.NoError(t, err)
	defer s.Close()
	gs, err := s.Sample()
	require.ErrorIs(t, err, nvml.ERROR_UNKNOWN)
	require.Len(t, gs, 1)
	assert.Nil(t, gs[0].Util, "the first reading is empty")
	assert.Equal(t, []string{"handle: ERROR_UNKNOWN"}, gs[0].Errors)
	gs, err = s.Sample()
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.NotNil(t, gs[0].Util, "the second reading is full")
	assert.Equal(t, "GPU-a", gs[0].UUID)
}

// Close does not wait for a sample stuck in the driver; NVML is shut down, once, when
// that sample returns. A second Sample meanwhile is refused.
func TestCloseDuringStuckSample(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	d := fakeDevice("A", "GPU-a", 1, 1, 1, 2, 1, 1)
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		close(entered)
		<-release
		return nvml.Utilization{Gpu: 3}, nvml.SUCCESS
	}
	lib := fakeLib(nvml.SUCCESS, d)
	s, err := New(lib)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	var got []ledger.GPU
	go func() { defer wg.Done(); got, _ = s.Sample() }()
	<-entered
	_, err = s.Sample()
	assert.ErrorIs(t, err, ErrBusy, "a concurrent Sample is refused")
	require.NoError(t, s.Close())
	assert.Empty(t, lib.ShutdownCalls(), "no Shutdown during a sample")
	close(release)
	wg.Wait()
	require.Len(t, got, 1, "the stuck sample still returns its reading")
	require.NotNil(t, got[0].Util)
	assert.Equal(t, 3.0, *got[0].Util)
	assert.Len(t, lib.ShutdownCalls(), 1, "Shutdown once the sample returned")
	require.NoError(t, s.Close())
	assert.Len(t, lib.ShutdownCalls(), 1, "Shutdown once in all")
}

func assertReadings(t *testing.T, got, want []ledger.GPU) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		g, err := json.Marshal(got[i])
		require.NoError(t, err)
		w, err := json.Marshal(want[i])
		require.NoError(t, err)
		assert.JSONEq(t, string(w), string(g), "device %d", i)
	}
}
