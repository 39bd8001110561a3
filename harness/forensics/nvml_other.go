//go:build !cgo || !linux

package forensics

import "context"

// NVMLSnapshot reports that this binary cannot reach NVML (it needs cgo on Linux).
func NVMLSnapshot(context.Context) (*GPUReport, error) {
	return &GPUReport{Note: "no GPU telemetry: built without cgo (NVML needs CGO_ENABLED=1 on Linux)"}, nil
}
