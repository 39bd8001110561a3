//go:build cgo && linux

package gpu

import (
	"errors"
	"fmt"
	"pdsoak/ledger"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Lib is the part of NVML the sampler uses. nvml.New() satisfies it, and so does
// go-nvml's generated fake, mock.Interface, in tests.
type Lib interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
}

// Open initialises the system's NVML (libnvidia-ml.so.1, loaded at run time) and
// returns a sampler for its GPUs; see New.
func Open() (*Sampler, error) { return New(nvml.New()) }

// New initialises lib once and finds its devices. A machine without GPU telemetry — no
// NVML library, no loaded driver, no GPU — gives an unavailable Sampler and a nil
// error: that is an informational state, never a failure. Any other initialisation
// failure also gives an unavailable Sampler, with the error (the run goes on without
// GPU samples; the caller says why). An available Sampler must be closed.
func New(lib Lib) (*Sampler, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if why, ok := noGPU(ret); ok {
			return unavailable("no GPU telemetry: " + why), nil
		}
		return unavailable(fmt.Sprintf("no GPU telemetry: NVML init: %v", ret)), fmt.Errorf("gpu: nvml init: %w", ret)
	}
	shutdown := func() error {
		if ret := lib.Shutdown(); ret != nvml.SUCCESS {
			return fmt.Errorf("gpu: nvml shutdown: %w", ret)
		}
		return nil
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		serr := shutdown()
		if why, ok := noGPU(ret); ok {
			return unavailable("no GPU telemetry: " + why), serr
		}
		return unavailable(fmt.Sprintf("no GPU telemetry: NVML device count: %v", ret)),
			errors.Join(fmt.Errorf("gpu: nvml device count: %w", ret), serr)
	}
	if n <= 0 {
		return unavailable("no GPU telemetry: NVML is loaded but found no GPU"), shutdown()
	}
	r := &reader{lib: lib, devs: make([]*device, n)}
	names := make([]string, n)
	models := make([]string, n)
	for i := range r.devs {
		d := &device{index: i, unsupported: map[string]bool{}}
		r.devs[i] = d
		var errs []string
		_ = r.identify(d, &errs) // in the status line; samples ask again unless unsupported
		models[i] = d.name
		names[i] = fmt.Sprintf("%d: %s", i, strings.TrimSpace(d.name+" "+d.uuid))
		if len(errs) > 0 {
			names[i] += " (" + strings.Join(errs, ", ") + ")"
		}
	}
	return &Sampler{
		status:   fmt.Sprintf("GPU telemetry: %d devices: %s", n, strings.Join(names, "; ")),
		names:    models,
		read:     r.read,
		shutdown: shutdown,
	}, nil
}

// noGPU says whether ret means "this machine has no GPU telemetry", and why.
func noGPU(ret nvml.Return) (string, bool) {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "the NVML library (libnvidia-ml.so.1, part of the NVIDIA driver) was not found", true
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded", true
	case nvml.ERROR_GPU_NOT_FOUND, nvml.ERROR_NOT_FOUND:
		return "NVML found no GPU", true
	}
	return "", false
}

// reader holds the device handles; Sampler guarantees one read at a time.
type reader struct {
	lib  Lib
	devs []*device
}

type device struct {
	index      int
	h          nvml.Device // nil until DeviceGetHandleByIndex succeeds
	name, uuid string
	// unsupported holds the fields that returned ERROR_NOT_SUPPORTED: they are noted
	// once and not asked for again.
	unsupported map[string]bool
}

// failed records a failed read of field: the reading goes without it, the failure is
// named in errs and joined into err.
func (d *device) failed(field string, ret nvml.Return, errs *[]string, err *error) {
	*errs = append(*errs, field+": "+ret.Error())
	*err = errors.Join(*err, fmt.Errorf("gpu: device %d %s: %w", d.index, field, ret))
	if ret == nvml.ERROR_NOT_SUPPORTED {
		d.unsupported[field] = true
	}
}

func (d *device) asks(field string) bool { return !d.unsupported[field] }

// identify gets the handle, name and UUID if they are not known yet.
func (r *reader) identify(d *device, errs *[]string) error {
	var err error
	if d.h == nil {
		h, ret := r.lib.DeviceGetHandleByIndex(d.index)
		if ret != nvml.SUCCESS {
			d.failed("handle", ret, errs, &err)
			return err
		}
		d.h = h
	}
	if d.name == "" && d.asks("name") {
		if v, ret := d.h.GetName(); ret == nvml.SUCCESS {
			d.name = v
		} else {
			d.failed("name", ret, errs, &err)
		}
	}
	if d.uuid == "" && d.asks("uuid") {
		if v, ret := d.h.GetUUID(); ret == nvml.SUCCESS {
			d.uuid = v
		} else {
			d.failed("uuid", ret, errs, &err)
		}
	}
	return err
}

func (r *reader) read() ([]ledger.GPU, error) {
	out := make([]ledger.GPU, 0, len(r.devs))
	var all error
	for _, d := range r.devs {
		g, err := r.readDevice(d)
		out = append(out, g)
		all = errors.Join(all, err)
	}
	return out, all
}

func (r *reader) readDevice(d *device) (ledger.GPU, error) {
	var errs []string
	err := r.identify(d, &errs)
	g := ledger.GPU{Index: d.index, Name: d.name, UUID: d.uuid}
	if d.h == nil {
		g.Errors = errs
		return g, err
	}
	h := d.h
	if d.asks("utilization") {
		if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.Util, g.MemUtil = ptr(float64(u.Gpu)), ptr(float64(u.Memory))
		} else {
			d.failed("utilization", ret, &errs, &err)
		}
	}
	if d.asks("memory") {
		if m, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemUsed, g.MemTotal = ptr(m.Used), ptr(m.Total)
		} else {
			d.failed("memory", ret, &errs, &err)
		}
	}
	if d.asks("power") {
		if mw, ret := h.GetPowerUsage(); ret == nvml.SUCCESS {
			g.PowerW = ptr(float64(mw) / 1000)
		} else {
			d.failed("power", ret, &errs, &err)
		}
	}
	if d.asks("temperature") {
		// GetTemperatureV replaces it only on drivers from 2024 on, and its handler
		// cannot be faked; the deprecated call works on every driver.
		if c, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			g.TempC = ptr(float64(c))
		} else {
			d.failed("temperature", ret, &errs, &err)
		}
	}
	g.Errors = errs
	return g, err
}

func ptr[T any](v T) *T { return &v }
