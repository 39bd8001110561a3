package harness

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/harness/gpu"
	"pdsoak/ledger"
)

// gpuWarnEvery spaces out the log lines about incomplete GPU samples: each reading
// names its own failures in the ledger, the log only needs a reminder.
const gpuWarnEvery = time.Minute

// announceGPU writes one ledger line saying whether GPU telemetry is available (a
// machine without a driver or GPU is an informational state, never a failure) and, when
// the machine has NVIDIA device nodes but NVML cannot be used, a note: the console
// shows notes, and such a run silently lacks the GPU side of the story.
func (r *runner) announceGPU() {
	line := ledger.Event{Type: ledger.EventLog, Source: ledger.GPUSource, Message: r.gpu.Status()}
	if r.gpuErr != nil {
		line.Error = r.gpuErr.Error()
		r.log.Warn("gpu telemetry", "err", r.gpuErr)
	}
	r.led.Emit(line)
	if note, ok := nvidiaNote(r.gpu, r.opts.NVIDIADevices); ok {
		r.led.Emit(ledger.Event{Type: ledger.EventNote, Source: ledger.GPUSource, Message: note})
	}
}

// nvidiaNote returns the note for a machine whose NVIDIA devices (device nodes matching
// glob) have no GPU telemetry, and whether there is one.
func nvidiaNote(s *gpu.Sampler, glob string) (string, bool) {
	if s.Available() {
		return "", false
	}
	devs, err := filepath.Glob(glob)
	if err != nil || len(devs) == 0 {
		return "", false
	}
	shown := devs
	if len(shown) > 3 {
		shown = append(shown[:3:3], "…")
	}
	why := strings.TrimPrefix(s.Status(), "no GPU telemetry: ")
	return fmt.Sprintf("this machine has NVIDIA devices (%s) but the run has no GPU telemetry: %s",
		strings.Join(shown, ", "), why), true
}

// closeGPU shuts NVML down; call it once the GPU sampler has stopped.
func (r *runner) closeGPU() {
	if err := r.gpu.Close(); err != nil {
		r.log.Warn("gpu telemetry", "err", err)
		r.led.Emit(ledger.Event{Type: ledger.EventLog, Source: ledger.GPUSource, Message: "gpu: shutdown", Error: err.Error()})
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
	warn := rate.Sometimes{First: 1, Interval: gpuWarnEvery}
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
		if res.err != nil {
			warn.Do(func() { log.Warn("gpu sample incomplete", "err", res.err) })
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
