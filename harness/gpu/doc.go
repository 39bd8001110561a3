// Package gpu reads GPU utilisation and memory through NVML (github.com/NVIDIA/go-nvml)
// so the harness ledger can show what the GPUs were doing next to the requests in
// flight: the incident this product is built around is "requests hang while the GPUs
// sit idle", and a report should be able to say "30 requests stuck while GPU
// utilisation was 0%".
//
// NVML is initialised once (Open, or New over any Lib such as go-nvml's generated
// mock.Interface) and shut down once (Close). A machine without GPU telemetry — no
// libnvidia-ml.so.1, no loaded driver, no GPU, or a binary built without cgo — gives an
// unavailable Sampler and no error: Status says why, once, and Sample returns nothing.
// Other initialisation failures (no permission, a driver/library mismatch) also give an
// unavailable Sampler, with an error the caller reports; the run goes on either way.
//
// Each Sample reads, per device: index, name, UUID, GPU and memory utilisation (%),
// memory used/total (bytes), power (W) and temperature (°C), as ledger.GPU values. A
// call that fails leaves its field out of that reading, names the failure in the
// reading's Errors and in the returned (joined, %w-wrapped nvml.Return) error; it never
// fails the sample. A field the device reports ERROR_NOT_SUPPORTED for is noted once
// and not asked again; other failures are retried every sample. NVML calls cannot be
// interrupted: a Sample still inside the driver makes the next one return ErrBusy, and
// Close does not wait for it (NVML is shut down when it returns).
//
// Main loop (the harness's, in harness/gpu.go):
//
//	s, err := gpu.Open()        // nvml.Init once; never fatal
//	ledger.log(s.Status())      // "GPU telemetry: 2 devices: …" or "no GPU telemetry: …"
//	defer s.Close()             // nvml.Shutdown once
//	for range every(2 * time.Second) {
//		gs, err := s.Sample()   // partial readings on error
//		ledger.Emit(Event{Type: sample, Source: "gpu", GPUs: gs, InFlight: n})
//	}
//
// The real NVML binding needs cgo on Linux (the Makefile exports
// CGO_CFLAGS=-Wno-deprecated-declarations for go-nvml's header); without cgo, Open
// reports no GPU telemetry and the rest of the harness builds and runs unchanged.
package gpu
