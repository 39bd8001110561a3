//go:build cgo && linux

package gpu

import (
	"encoding/json"
	"errors"
	"pdsoak/ledger"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
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
			if tt.wantErr == nil && err != nil {
				t.Fatalf("New: %v; want no error", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("New: %v; want %v", err, tt.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "gpu: ") {
				t.Errorf("error %q lacks the package name", err)
			}
			if s == nil || s.Available() {
				t.Fatalf("want an unavailable sampler, got %+v", s)
			}
			if !strings.Contains(s.Status(), tt.status) || !strings.HasPrefix(s.Status(), "no GPU telemetry: ") {
				t.Errorf("status %q, want it to say %q", s.Status(), tt.status)
			}
			if gs, err := s.Sample(); gs != nil || err != nil {
				t.Errorf("Sample = %v, %v; want nil, nil", gs, err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if n := len(tt.lib.InitCalls()); n != 1 {
				t.Errorf("Init called %d times", n)
			}
			if n := len(tt.lib.ShutdownCalls()); n != tt.shutdowns {
				t.Errorf("Shutdown called %d times, want %d", n, tt.shutdowns)
			}
		})
	}
}

func TestTwoDevices(t *testing.T) {
	lib := fakeLib(nvml.SUCCESS,
		fakeDevice("NVIDIA H200", "GPU-0000", 0, 0, 70<<30, 141<<30, 75_500, 31),
		fakeDevice("NVIDIA H200", "GPU-1111", 97, 40, 120<<30, 141<<30, 690_000, 64))
	s, err := New(lib)
	if err != nil || !s.Available() {
		t.Fatalf("New: %v, available %v", err, s.Available())
	}
	if want := "GPU telemetry: 2 devices: 0: NVIDIA H200 GPU-0000; 1: NVIDIA H200 GPU-1111"; s.Status() != want {
		t.Errorf("status %q, want %q", s.Status(), want)
	}
	if got := s.Names(); len(got) != 2 || got[0] != "NVIDIA H200" || got[1] != "NVIDIA H200" {
		t.Errorf("names %q, want both devices' names", got)
	}
	want := []ledger.GPU{
		{Index: 0, Name: "NVIDIA H200", UUID: "GPU-0000", Util: ptr(0.0), MemUtil: ptr(0.0),
			MemUsed: ptr(uint64(70 << 30)), MemTotal: ptr(uint64(141 << 30)), PowerW: ptr(75.5), TempC: ptr(31.0)},
		{Index: 1, Name: "NVIDIA H200", UUID: "GPU-1111", Util: ptr(97.0), MemUtil: ptr(40.0),
			MemUsed: ptr(uint64(120 << 30)), MemTotal: ptr(uint64(141 << 30)), PowerW: ptr(690.0), TempC: ptr(64.0)},
	}
	for round := range 3 {
		gs, err := s.Sample()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		assertReadings(t, gs, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if gs, err := s.Sample(); gs != nil || err != nil {
		t.Errorf("Sample after Close = %v, %v", gs, err)
	}
	if i, sh := len(lib.InitCalls()), len(lib.ShutdownCalls()); i != 1 || sh != 1 {
		t.Errorf("Init %d, Shutdown %d times; want once each", i, sh)
	}
	if n := len(lib.DeviceGetHandleByIndexCalls()); n != 2 {
		t.Errorf("handles asked %d times; want once per device", n)
	}
}

func TestFailingCalls(t *testing.T) {
	d0 := fakeDevice("A", "GPU-a", 10, 5, 1, 2, 1000, 40)
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	d1 := fakeDevice("B", "GPU-b", 20, 6, 1, 2, 2000, 50)
	d1.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d1.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	lib := fakeLib(nvml.SUCCESS, d0, d1)
	s, err := New(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(s.Status(), "1: B (uuid: ERROR_NOT_SUPPORTED)") {
		t.Errorf("status %q should name the failed uuid read", s.Status())
	}

	gs, err := s.Sample()
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) || !errors.Is(err, nvml.ERROR_NOT_SUPPORTED) {
		t.Errorf("err = %v; want it to wrap GPU_IS_LOST and NOT_SUPPORTED", err)
	}
	if err != nil && !strings.Contains(err.Error(), "gpu: device 0 utilization: ERROR_GPU_IS_LOST") {
		t.Errorf("err %q should say which device and field", err)
	}
	want := []ledger.GPU{
		{Index: 0, Name: "A", UUID: "GPU-a", MemUsed: ptr(uint64(1)), MemTotal: ptr(uint64(2)), PowerW: ptr(1.0), TempC: ptr(40.0),
			Errors: []string{"utilization: ERROR_GPU_IS_LOST"}},
		{Index: 1, Name: "B", Util: ptr(20.0), MemUtil: ptr(6.0), MemUsed: ptr(uint64(1)), MemTotal: ptr(uint64(2)), TempC: ptr(50.0),
			Errors: []string{"power: ERROR_NOT_SUPPORTED"}},
	}
	assertReadings(t, gs, want)

	// Next sample: an unsupported field is not asked again, a lost GPU is.
	gs, err = s.Sample()
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) || errors.Is(err, nvml.ERROR_NOT_SUPPORTED) {
		t.Errorf("second err = %v; want GPU_IS_LOST only", err)
	}
	want[1].Errors = nil
	assertReadings(t, gs, want)
	if n := len(d1.GetPowerUsageCalls()); n != 1 {
		t.Errorf("unsupported power asked %d times; want once", n)
	}
	if n := len(d1.GetUUIDCalls()); n != 1 {
		t.Errorf("unsupported uuid asked %d times; want once", n)
	}
	if n := len(d0.GetUtilizationRatesCalls()); n != 2 {
		t.Errorf("utilization of the lost GPU asked %d times; want every sample", n)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gs, err := s.Sample()
	if !errors.Is(err, nvml.ERROR_UNKNOWN) || len(gs) != 1 || gs[0].Util != nil ||
		len(gs[0].Errors) != 1 || gs[0].Errors[0] != "handle: ERROR_UNKNOWN" {
		t.Fatalf("first sample = %+v, %v; want an empty reading that names the handle failure", gs, err)
	}
	gs, err = s.Sample()
	if err != nil || gs[0].Util == nil || gs[0].UUID != "GPU-a" {
		t.Fatalf("second sample = %+v, %v; want a full reading", gs, err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var got []ledger.GPU
	go func() { defer wg.Done(); got, _ = s.Sample() }()
	<-entered
	if _, err := s.Sample(); !errors.Is(err, ErrBusy) {
		t.Errorf("concurrent Sample: %v; want ErrBusy", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 0 {
		t.Errorf("Shutdown during a sample: %d calls", n)
	}
	close(release)
	wg.Wait()
	if len(got) != 1 || got[0].Util == nil || *got[0].Util != 3 {
		t.Errorf("the stuck sample still returns its reading, got %+v", got)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times after the sample returned; want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times; want 1", n)
	}
}

func assertReadings(t *testing.T, got, want []ledger.GPU) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d readings, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Errorf("device %d:\n got %s\nwant %s", i, g, w)
		}
	}
}
