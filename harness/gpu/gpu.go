package gpu

import (
	"errors"
	"pdsoak/ledger"
	"sync"
)

// ErrBusy is returned by Sample while an earlier Sample is still inside the driver.
var ErrBusy = errors.New("gpu: the previous sample has not returned yet")

// Sampler reads every GPU's utilisation and memory through NVML. It is safe for
// concurrent use; NVML is initialised once by Open (or New) and shut down once by Close.
// An unavailable Sampler (no driver, no GPU, built without cgo) returns no readings and
// no error.
type Sampler struct {
	status   string
	names    []string                     // device names, in index order
	read     func() ([]ledger.GPU, error) // nil: unavailable
	shutdown func() error                 // nil: nothing to shut down

	mu           sync.Mutex
	busy         bool // a read is inside the driver
	closed       bool
	closePending bool // Close came during a read; the read shuts NVML down when it returns
}

func unavailable(status string) *Sampler { return &Sampler{status: status} }

// Available reports whether the sampler has GPUs to read.
func (s *Sampler) Available() bool { return s.read != nil }

// Names returns the device names NVML reported when the sampler was opened (nil when
// unavailable), for a run's provenance.
func (s *Sampler) Names() []string { return append([]string(nil), s.names...) }

// Status is one line for the ledger: which GPUs are read, or why there is no GPU
// telemetry.
func (s *Sampler) Status() string { return s.status }

// Sample reads every device once. A field that could not be read is left out of that
// device's reading and named in its Errors; the returned error joins those failures
// (wrapped nvml return codes) and never means the readings are unusable. Sample returns
// nil, nil when the sampler is unavailable or closed, and ErrBusy while an earlier call
// is still inside the driver (NVML calls cannot be interrupted, so a caller that needs
// a bound runs Sample in its own goroutine and stops waiting).
func (s *Sampler) Sample() ([]ledger.GPU, error) {
	if s.read == nil {
		return nil, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil
	}
	if s.busy {
		s.mu.Unlock()
		return nil, ErrBusy
	}
	s.busy = true
	s.mu.Unlock()

	gs, err := s.read()

	s.mu.Lock()
	s.busy = false
	pending := s.closePending
	s.closePending = false
	s.mu.Unlock()
	if pending {
		// Close returned already; nobody is left to hear about a failed shutdown.
		_ = s.shutdown()
	}
	return gs, err
}

// Close shuts NVML down, once. When a Sample is still inside the driver, Close does not
// wait for it: the shutdown happens when that Sample returns.
func (s *Sampler) Close() error {
	s.mu.Lock()
	if s.closed || s.shutdown == nil {
		s.closed = true
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.busy {
		s.closePending = true
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.shutdown()
}
