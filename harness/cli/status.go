package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"pdsoak/ledger"
)

// status follows the ledger through Options.OnEvent and prints progress: a live line
// rewritten in place on a terminal, a plain line every interval otherwise. Note events
// are printed as they go by.
type status struct {
	w        io.Writer
	tty      bool
	interval time.Duration
	now      func() time.Time

	wmu sync.Mutex // serialises writes to w (the printer and notes)

	mu        sync.Mutex
	start     time.Time
	scheduled int
	done      int
	outcomes  map[ledger.Outcome]int
	faults    map[string]bool // active faults
	lastDone  int
	lastAt    time.Time

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newStatus(w io.Writer, tty bool, interval time.Duration) *status {
	now := time.Now
	return &status{w: w, tty: tty, interval: interval, now: now, start: now(), lastAt: now(),
		outcomes: map[ledger.Outcome]int{}, faults: map[string]bool{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// observe is the OnEvent callback; the harness may call it from many goroutines.
func (s *status) observe(e ledger.Event) {
	if e.Type == ledger.EventNote {
		s.note(e.Message)
		return
	}
	if e.Type == ledger.EventTargetDown || e.Type == ledger.EventTargetUp {
		s.note(s.liveness(e)) // the moment a target goes, not only in the report
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Type {
	case ledger.EventRunStart:
		s.start = s.now()
	case ledger.EventScheduled:
		s.scheduled++
	case ledger.EventDone:
		s.done++
		s.outcomes[e.Outcome]++
	case ledger.EventFaultStart:
		s.faults[e.Fault] = true
	case ledger.EventFaultStop:
		delete(s.faults, e.Fault)
	}
}

// note prints a note on its own line (clearing the live line on a terminal; the
// printer redraws it at its next tick).
func (s *status) note(msg string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.tty {
		fmt.Fprint(s.w, "\r\033[K")
	}
	fmt.Fprintln(s.w, "harness: note:", msg)
}

// line renders the current status.
func (s *status) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	elapsed := now.Sub(s.start).Truncate(time.Second)
	rate := 0.0
	if dt := now.Sub(s.lastAt).Seconds(); dt > 0 {
		rate = float64(s.done-s.lastDone) / dt
	}
	s.lastDone, s.lastAt = s.done, now
	inFlight := max(s.scheduled-s.done, 0)
	drops := s.outcomes[ledger.OutcomeStalled] + s.outcomes[ledger.OutcomeDeadlineExceeded]
	errs := s.done - s.outcomes[ledger.OutcomeOK] - s.outcomes[ledger.OutcomeRejected] - drops
	var b strings.Builder
	fmt.Fprintf(&b, "%6s  in flight %d  done %d  ok %d  rejected %d  errors %d  silent drops %d  %.1f req/s",
		elapsed, inFlight, s.done, s.outcomes[ledger.OutcomeOK], s.outcomes[ledger.OutcomeRejected], errs, drops, rate)
	if n := len(s.faults); n > 0 {
		fmt.Fprintf(&b, "  faults active %d", n)
	}
	return b.String()
}

// run prints until close is called.
func (s *status) run() {
	defer close(s.stopped)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			if s.tty {
				s.print("\r\033[K%s\n", s.line())
			}
			return
		case <-t.C:
			if s.tty {
				s.print("\r\033[K%s", s.line())
			} else {
				s.print("%s\n", s.line())
			}
		}
	}
}

func (s *status) print(format string, args ...any) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	fmt.Fprintf(s.w, format, args...)
}

// close stops the printer and waits for it.
func (s *status) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.stopped
}

// liveness says a target_down / target_up event in a console line.
func (s *status) liveness(e ledger.Event) string {
	s.mu.Lock()
	at := s.now().Sub(s.start).Seconds()
	s.mu.Unlock()
	if e.Type == ledger.EventTargetDown {
		return fmt.Sprintf("%s went down at %.1f s (no answer from %s)", e.Source, at, e.URL)
	}
	return fmt.Sprintf("%s is back at %.1f s", e.Source, at)
}
