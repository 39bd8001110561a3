//go:build !cgo || !linux

package gpu

// Open reports no GPU telemetry: NVML is reached through cgo on Linux, and this binary
// was built without it.
func Open() (*Sampler, error) {
	return unavailable("no GPU telemetry: built without cgo (NVML needs CGO_ENABLED=1 on Linux)"), nil
}
