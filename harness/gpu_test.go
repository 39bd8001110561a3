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

// The GPU sampler writes sample events with both devices' readings and the in-flight
// count until its context ends, and the ledger's reports see them.
func TestGPUSamplerLedger(t *testing.T) {
	devs := []*mock.Device{mockGPU(0), mockGPU(55)}
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
	s, err := gpu.New(lib)
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := led.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times", n)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples := 0
	if _, err := ledger.Read(f, func(e ledger.Event) error {
		if e.Type != ledger.EventSample || e.Source != ledger.GPUSource {
			t.Errorf("unexpected event %+v", e)
			return nil
		}
		samples++
		if len(e.GPUs) != 2 || e.InFlight != 7 || e.GPUs[0].Util == nil || *e.GPUs[0].Util != 0 ||
			e.GPUs[1].Util == nil || *e.GPUs[1].Util != 55 || e.GPUs[1].PowerW != nil {
			t.Errorf("sample %+v", e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if samples < 3 {
		t.Errorf("%d samples in the ledger, want >= 3", samples)
	}
}
