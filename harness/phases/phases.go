package phases

import (
	"context"
	"errors"
	"sync"
	"time"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// PDCounterEvery is how often the prefill counters are read (pd_path's windows are
// reports.PDWindow, four readings each): the prefills of a process that dies after its
// last reading are never counted, so the gap is kept short.
const PDCounterEvery = 500 * time.Millisecond

// ReadAll reads one value per process: vals[i] answers procs[i] unless errs[i] is set.
type ReadAll func(ctx context.Context) (vals []map[string]float64, errs []error)

// Sample writes a sample event of every process that answers, every interval until
// stop; warn hears of the ones that do not (a gap in the samples).
func Sample(clk Clock, every time.Duration, procs []string, read ReadAll, emit func(ledger.Event), warn func(process string, err error)) (stop func()) {
	if len(procs) == 0 {
		return func() {}
	}
	return clk.Every(every, func(ctx context.Context) {
		vals, errs := read(ctx)
		for i, v := range vals {
			if errs[i] != nil {
				if warn != nil && ctx.Err() == nil {
					warn(procs[i], errs[i])
				}
				continue
			}
			emit(judge.SampleEvent(procs[i], v))
		}
	})
}

// LeakCheck reads every process until all leak gauges read 0 or bound passes, each
// round judged by judge.LeakRound. The last pause is cut short by the bound: no read
// after it.
func LeakCheck(clk Clock, procs []string, read ReadAll, bound, poll time.Duration) judge.LeakVerdict {
	if len(procs) == 0 {
		return judge.LeakVerdict{Detail: judge.LeakNoMetrics}
	}
	start := clk.Now()
	end := start.Add(bound)
	round := judge.NewLeakRound(procs)
	for {
		vals, errs := read(context.Background())
		v := round.Update(vals, errs, clk.Now().Sub(start))
		if v.Passed || !clk.Now().Before(end) {
			return v
		}
		if next := clk.Now().Add(poll); next.After(end) {
			clk.Sleep(end.Sub(clk.Now()))
			return v
		}
		if !clk.Sleep(poll) {
			return v
		}
	}
}

// WatchPD reads the prefill counters at once, then every PDCounterEvery until stop;
// stop(last) reads them a last time (after the drain) when last is true. read writes
// one pd_counter event per counter (PDCounterEvent).
func WatchPD(clk Clock, counters []scenarios.PDCounter, read func(ctx context.Context)) (stop func(last bool)) {
	if len(counters) == 0 {
		return func(bool) {}
	}
	read(context.Background())
	halt := clk.Every(PDCounterEvery, read)
	var once sync.Once
	return func(last bool) {
		once.Do(func() {
			halt()
			if last {
				read(context.Background())
			}
		})
	}
}

// ErrCounterAbsent marks a reading whose process answered without any series of the
// selector (its event's Cause is ledger.PDCounterAbsent): a labelled counter has none
// until its first increment.
var ErrCounterAbsent = errors.New("harness: no such series")

// PDCounterEvent is the pd_counter event of one reading of c: its value, or the error
// that says it could not be read (reports then counts no prefill for it since its last
// reading) or found no series (ErrCounterAbsent).
func PDCounterEvent(c scenarios.PDCounter, v float64, err error) ledger.Event {
	ev := ledger.Event{Type: ledger.EventPDCounter, Source: c.Process, Detail: c.Selector.String()}
	if err != nil {
		ev.Error = err.Error()
		if errors.Is(err, ErrCounterAbsent) {
			ev.Cause = ledger.PDCounterAbsent
		}
	} else {
		ev.Metrics = map[string]float64{c.Selector.String(): v}
	}
	return ev
}

// Drain lets in-flight requests run to their own deadlines within the drain bound (a
// brief one after an interrupt: judge.DrainBound), then cancels whatever is left and
// waits, bounded by resolve, for it. wait(d) waits at most d for the load to be over
// and says whether it is; left counts the requests in flight.
func Drain(clk Clock, timeout, cancelDrain, resolve time.Duration, interrupted bool,
	wait func(time.Duration) bool, left func() int, cancel func()) ledger.Event {
	bound := judge.DrainBound(timeout, cancelDrain, interrupted)
	start := clk.Now()
	drained := wait(bound)
	n := left()
	if !drained {
		cancel()
		wait(resolve)
	}
	return judge.DrainEvent(drained, n, clk.Now().Sub(start), bound, interrupted)
}
