package harness

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"pdsoak/harness/gpu"
	"pdsoak/ledger"
)

// startGPU opens NVML for the run, writes one ledger line saying whether GPU telemetry
// is available (a machine without a driver or GPU is an informational state, never a
// failure) and, when it is, samples the GPUs every SampleInterval under aux until ctx
// ends. The returned func shuts NVML down; call it after aux is done.
func (r *runner) startGPU(ctx context.Context, aux *sync.WaitGroup) (closeGPU func()) {
	s, err := gpu.Open()
	line := ledger.Event{Type: ledger.EventLog, Source: ledger.GPUSource, Message: s.Status()}
	if err != nil {
		line.Error = err.Error()
		r.log.Warn("gpu telemetry", "err", err)
	}
	r.led.Emit(line)
	if !s.Available() {
		return func() {}
	}
	inflight := func() int { return int(r.exec.inflight.Load()) }
	aux.Add(1)
	go func() { defer aux.Done(); gpuSampler(ctx, s, r.led, r.log, inflight, SampleInterval) }()
	return func() {
		if err := s.Close(); err != nil {
			r.log.Warn("gpu telemetry", "err", err)
			r.led.Emit(ledger.Event{Type: ledger.EventLog, Source: ledger.GPUSource, Message: "gpu: shutdown", Error: err.Error()})
		}
	}
}

// gpuSampler writes a GPU sample (Source "gpu", the readings and the requests in
// flight) now and every interval until ctx ends. A read stuck in the driver holds back
// the next one; it does not hold the run back: the sampler stops waiting when ctx ends.
func gpuSampler(ctx context.Context, s *gpu.Sampler, led *ledger.Writer, log *slog.Logger, inflight func() int, every time.Duration) {
	type result struct {
		gs  []ledger.GPU
		err error
	}
	t := time.NewTicker(every)
	defer t.Stop()
	warned := false
	for {
		ch := make(chan result, 1)
		go func() {
			gs, err := s.Sample()
			ch <- result{gs, err}
		}()
		var res result
		select {
		case <-ctx.Done():
			return
		case res = <-ch:
		}
		if res.err != nil && !warned {
			// Each reading names its own failures in the ledger; the log says it once.
			log.Warn("gpu sample incomplete", "err", res.err)
			warned = true
		}
		if len(res.gs) > 0 {
			led.Emit(ledger.Event{Type: ledger.EventSample, Source: ledger.GPUSource, GPUs: res.gs, InFlight: inflight()})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
