package sim

// proc is a simulated process's life, which the worker and the router both embed: its
// incarnation (bumped at each start and crash, so that the events of an earlier life
// are dropped), whether it runs, SIGSTOP, and the events that reach it while it is
// stopped (SIGCONT delivers what the kernel buffered), or while busy says it cannot take
// them (a worker's loop blocked in bootstrap dials).
type proc struct {
	inc      int
	alive    bool
	paused   bool
	deferred []func()
	busy     func() bool // nil: never
}

// held reports whether an event reaching the process now waits.
func (p *proc) held() bool { return p.paused || (p.busy != nil && p.busy()) }

// post runs fn on the process: at once, later when it is held, never when the
// incarnation inc died since.
func (p *proc) post(inc int, fn func()) {
	switch {
	case !p.alive || inc != p.inc:
	case p.held():
		p.deferred = append(p.deferred, fn)
	default:
		fn()
	}
}

// flush runs the events that waited, in order, until the process dies or is held again.
func (p *proc) flush() {
	d := p.deferred
	p.deferred = nil
	for i, fn := range d {
		if !p.alive {
			return
		}
		if p.held() {
			p.deferred = append(p.deferred, d[i:]...)
			return
		}
		fn()
	}
}

// start begins a new life: running, not stopped, nothing waiting.
func (p *proc) start() {
	p.inc++
	p.alive, p.paused, p.deferred = true, false, nil
}

// die ends this life: what waited is lost with it.
func (p *proc) die() {
	p.alive, p.deferred = false, nil
	p.inc++
}

// stop is SIGSTOP, cont SIGCONT; each reports whether it changed anything.
func (p *proc) stop() bool {
	if !p.alive || p.paused {
		return false
	}
	p.paused = true
	return true
}

func (p *proc) cont() bool {
	if !p.alive || !p.paused {
		return false
	}
	p.paused = false
	return true
}
