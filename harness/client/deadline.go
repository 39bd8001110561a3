package client

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadlines is a request's four deadlines on one timer. The timer is set for the
// earliest deadline that may still fire; when it goes off, the deadline due is fired,
// or, when none is due (a stream made progress since, the connect phase ended, the first
// token came), it is set again for the next. So a request arms one timer, not four, with
// no closure per deadline, and a chunk only stores its time: a held stream that gets a
// token a second used to move its stall timer in the runtime's timer heap each second.
//
// A deadline is live while the phase it bounds lasts: connect until the request is
// written, first_token (streams) until the first content token, stall (streams) from
// the head on, total always. The one due first fires; of two due at once the order is
// total, connect, first_token, stall.
type deadlines struct {
	dl     Deadlines
	stream bool
	start  time.Time // the request's send, the clock of the offsets below
	fire   func(cause error, name string)
	phase  *atomic.Int32

	stallFrom atomic.Int64 // the stall bound's start offset (the head, then each chunk); -1: not armed

	mu      sync.Mutex
	t       *time.Timer
	at      time.Duration // the offset the timer is set for
	pending bool          // the timer is set and has not gone off: at is ahead
	stopped bool
}

// arm starts the deadlines of a request sent now (the stall bound starts with armStall).
func (d *deadlines) arm(dl Deadlines, stream bool, phase *atomic.Int32, fire func(cause error, name string)) {
	d.dl, d.stream, d.phase, d.fire = dl, stream, phase, fire
	d.start = time.Now()
	d.stallFrom.Store(-1)
	if at, ok := d.next(); ok {
		d.mu.Lock()
		d.at, d.pending = at, true
		d.t = time.AfterFunc(at, d.check)
		d.mu.Unlock()
	}
}

// armStall starts the stall bound now (the response head arrived).
func (d *deadlines) armStall() {
	if d.dl.Stall <= 0 {
		return
	}
	from := time.Since(d.start)
	d.stallFrom.Store(int64(from))
	d.mu.Lock()
	defer d.mu.Unlock()
	// A timer that went off and found nothing live is set again here; a check that has
	// yet to take mu sees this bound itself.
	if at := from + d.dl.Stall; !d.stopped && (!d.pending || at < d.at) {
		d.set(at)
	}
}

// progress restarts the stall bound now (a chunk arrived).
func (d *deadlines) progress() {
	if d.stallFrom.Load() >= 0 {
		d.stallFrom.Store(int64(time.Since(d.start)))
	}
}

// stop stops the timer for good.
func (d *deadlines) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.t != nil {
		d.t.Stop()
	}
}

// set moves the timer to offset at (d.mu held).
func (d *deadlines) set(at time.Duration) {
	d.at, d.pending = at, true
	if d.t == nil {
		d.t = time.AfterFunc(at-time.Since(d.start), d.check)
		return
	}
	d.t.Reset(at - time.Since(d.start))
}

// next is the offset of the earliest live deadline (ok false: none).
func (d *deadlines) next() (at time.Duration, ok bool) {
	_, at, ok = d.due()
	return at, ok
}

// due is the earliest live deadline: its cause, name and offset.
func (d *deadlines) due() (name string, at time.Duration, ok bool) {
	take := func(n string, a time.Duration) {
		if !ok || a < at {
			name, at, ok = n, a, true
		}
	}
	ph := d.phase.Load()
	if d.dl.Total > 0 {
		take("total", d.dl.Total)
	}
	if d.dl.Connect > 0 && ph == phConnect {
		take("connect", d.dl.Connect)
	}
	if d.stream && d.dl.FirstToken > 0 && ph < phMidStream {
		take("first_token", d.dl.FirstToken)
	}
	if from := d.stallFrom.Load(); from >= 0 && d.dl.Stall > 0 {
		take("stall", time.Duration(from)+d.dl.Stall)
	}
	return name, at, ok
}

var causes = map[string]error{"total": ErrTotalDeadline, "connect": ErrConnectDeadline,
	"first_token": ErrFirstTokenDeadline, "stall": ErrStallDeadline}

// check runs when the timer goes off: it fires the deadline that is due, or sets the
// timer for the next one. It decides under mu: a stall bound armed between its look
// and its set would otherwise be overwritten by a later deadline (armStall saw a timer
// still pending, check had not seen the bound).
func (d *deadlines) check() {
	d.mu.Lock()
	d.pending = false
	name, at, ok := d.due()
	if !ok {
		d.mu.Unlock()
		return
	}
	if left := at - time.Since(d.start); left > 0 {
		if !d.stopped {
			d.set(at)
		}
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.fire(causes[name], name)
}
