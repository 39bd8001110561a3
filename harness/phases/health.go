package phases

import (
	"errors"
	"sync/atomic"
	"time"

	"pdsoak/ledger"
)

// The entry process's health events (truthful_health): one per probe of its /health,
// from the start of the probes until StopHealth, after the drain. The runner's prober
// and the simulator's both record through a Health, so both write the same events.

// HealthTimeout bounds one health probe: a /health that hangs is a failed probe, not a
// 200, even if it answers (within the liveness timeout, so the process is alive) later.
const HealthTimeout = time.Second

// ErrHealthTimeout is a health event's error when the entry gave no answer within
// HealthTimeout.
var ErrHealthTimeout = errors.New("harness: no answer within " + HealthTimeout.String())

// Health records the health events of the entry process Source, whose /health is URL.
type Health struct {
	Source, URL string
	emit        func(ledger.Event)
	off         atomic.Bool
}

// NewHealth records on emit until Stop.
func NewHealth(source, url string, emit func(ledger.Event)) *Health {
	return &Health{Source: source, URL: url, emit: emit}
}

// On reports whether a probe starting now is recorded (a probe started before Stop is
// recorded when its answer comes).
func (h *Health) On() bool { return h != nil && !h.off.Load() }

// Stop ends the recording (after the drain); liveness probing goes on.
func (h *Health) Stop() {
	if h != nil {
		h.off.Store(true)
	}
}

// Record writes one probe's outcome: the status it answered, or err when no HTTP
// answer came (ErrHealthTimeout when it hung).
func (h *Health) Record(status int, err error) {
	ev := ledger.Event{Type: ledger.EventHealth, Source: h.Source, URL: h.URL, Status: status}
	if err != nil {
		ev.Error = err.Error()
	}
	h.emit(ev)
}
