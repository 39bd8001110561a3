package failpoint

import "sync/atomic"

// Tally is one failpoint's counters as Status reports them, the one counting rule of
// the registry's Eval and of the simulator's failpoints (sim), which evaluate terms on
// a virtual clock: every evaluation while enabled counts in Evals, every one where a
// term other than "off" fired in Hits; a pause holds its caller in Paused and a sleep in
// Sleeping until it ends. Evals and Hits restart at 0 on Enable (Reset). Its methods
// may run concurrently; a registry point evaluates its chain under its own lock.
type Tally struct {
	evals, hits, paused, sleeping atomic.Int64
}

// Eval counts one evaluation of chain and returns the term that fired (Fire); nil when
// none did or an "off" term did.
func (t *Tally) Eval(chain []Term, draw func(percent float64) bool) *Term {
	t.evals.Add(1)
	fired := Fire(chain, draw)
	if fired == nil || fired.Action == ActOff {
		return nil
	}
	t.hits.Add(1)
	return fired
}

// Hold counts a caller held by a term of action a (Paused for a pause, Sleeping for a
// sleep; other actions hold nothing) until release, which counts once however often it
// is called.
func (t *Tally) Hold(a Action) (release func()) {
	var n *atomic.Int64
	switch a {
	case ActPause:
		n = &t.paused
	case ActSleep:
		n = &t.sleeping
	default:
		return func() {}
	}
	n.Add(1)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			n.Add(-1)
		}
	}
}

// Reset restarts Evals and Hits at 0 (Enable); the callers held stay counted until
// they are released.
func (t *Tally) Reset() {
	t.evals.Store(0)
	t.hits.Store(0)
}

// Status is the failpoint's status with these counts.
func (t *Tally) Status(name, terms string, enabled bool) Status {
	return Status{Name: name, Terms: terms, Enabled: enabled,
		Evals: t.evals.Load(), Hits: t.hits.Load(), Paused: t.paused.Load(), Sleeping: t.sleeping.Load()}
}
