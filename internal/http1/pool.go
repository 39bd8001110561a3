package http1

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Exported defaults of a Pool.
const (
	// DefaultIdleTimeout closes a pooled connection idle this long instead of reusing it:
	// below uvicorn's 5 s (SGLang's and vLLM's server), so the client is the side that
	// closes and the idle race is avoided rather than survived.
	DefaultIdleTimeout = 4 * time.Second
	// DefaultMaxIdle bounds the idle connections kept per address.
	DefaultMaxIdle = 10000
)

// Pool keeps idle keep-alive connections per address, most recently used on top.
type Pool struct {
	idleTimeout time.Duration
	maxIdle     int
	now         func() time.Time

	mu     sync.Mutex
	idle   map[string][]idleConn
	closed bool
}

type idleConn struct {
	nc    net.Conn
	since time.Time
}

// PoolOption configures a Pool.
type PoolOption func(*Pool)

// WithIdleTimeout sets how long a connection may stay idle and still be reused
// (DefaultIdleTimeout; ≤ 0 keeps the default).
func WithIdleTimeout(d time.Duration) PoolOption {
	return func(p *Pool) {
		if d > 0 {
			p.idleTimeout = d
		}
	}
}

// WithMaxIdle bounds the idle connections per address (DefaultMaxIdle).
func WithMaxIdle(n int) PoolOption {
	return func(p *Pool) {
		if n > 0 {
			p.maxIdle = n
		}
	}
}

// WithClock injects the clock (tests).
func WithClock(now func() time.Time) PoolOption { return func(p *Pool) { p.now = now } }

// NewPool returns an empty pool.
func NewPool(opts ...PoolOption) *Pool {
	p := &Pool{idleTimeout: DefaultIdleTimeout, maxIdle: DefaultMaxIdle, now: time.Now, idle: map[string][]idleConn{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// IdleTimeout is the pool's idle timeout.
func (p *Pool) IdleTimeout() time.Duration { return p.idleTimeout }

// Get returns an idle connection to addr that is still open, or nil. Connections idle
// longer than the idle timeout, or found closed by the peek, are closed on the way.
func (p *Pool) Get(addr string) net.Conn {
	now := p.now()
	for {
		p.mu.Lock()
		list := p.idle[addr]
		n := len(list)
		if n == 0 {
			p.mu.Unlock()
			return nil
		}
		ic := list[n-1]
		list[n-1] = idleConn{}
		p.idle[addr] = list[:n-1]
		p.mu.Unlock()
		if idle := now.Sub(ic.since); idle < p.idleTimeout && Alive(ic.nc) {
			return ic.nc
		}
		ic.nc.Close()
	}
}

// ErrClosed is a Put or Get after Close.
var ErrClosed = errors.New("http1: pool closed")

// Put returns a connection whose response was read to its end, and closes the pooled
// connections to addr idle longer than the idle timeout (the pool is a stack: after a
// burst the connections at its bottom would otherwise stay open for the run).
func (p *Pool) Put(addr string, nc net.Conn) {
	now := p.now()
	var stale []net.Conn
	p.mu.Lock()
	list := p.idle[addr]
	k := 0
	for k < len(list) && now.Sub(list[k].since) >= p.idleTimeout {
		stale = append(stale, list[k].nc)
		k++
	}
	if k > 0 {
		n := copy(list, list[k:])
		clear(list[n:])
		list = list[:n]
	}
	if p.closed || len(list) >= p.maxIdle {
		stale = append(stale, nc)
	} else {
		list = append(list, idleConn{nc: nc, since: now})
	}
	p.idle[addr] = list
	p.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// Reap closes every connection idle longer than the idle timeout.
func (p *Pool) Reap() {
	now := p.now()
	var old []net.Conn
	p.mu.Lock()
	for addr, list := range p.idle {
		keep := list[:0]
		for _, ic := range list {
			if now.Sub(ic.since) >= p.idleTimeout {
				old = append(old, ic.nc)
			} else {
				keep = append(keep, ic)
			}
		}
		clear(list[len(keep):])
		p.idle[addr] = keep
	}
	p.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// DropIdle closes the idle connections to addr: one was found closed by the server, so
// the others (as old, or older) most likely are too (it restarted).
func (p *Pool) DropIdle(addr string) {
	p.mu.Lock()
	list := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	for _, ic := range list {
		ic.nc.Close()
	}
}

// CloseIdle closes every idle connection; the pool stays usable.
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = map[string][]idleConn{}
	p.mu.Unlock()
	for _, list := range idle {
		for _, ic := range list {
			ic.nc.Close()
		}
	}
}

// Close closes every idle connection and makes Put close what it is given.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.CloseIdle()
}

// Closed reports whether Close was called.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// IdleRace reports whether err ended a request on a reused connection the way the idle
// keep-alive race does: the request was refused by the socket (a write error passed
// through WriteError), or the connection ended before any byte of the response
// (ErrNoResponse, from ReadResponse). The first proves that nothing reached a handler;
// the second does not: a server that read the request and then died, or a proxy that
// cut the connection, looks the same. A caller that re-sends on the second must accept a
// possible duplicate (the harness does, and records it as conn_retry); the router's legs,
// whose duplicate would reuse a bootstrap room, re-send only on the first. On a fresh
// connection, or after any response byte, it is false.
func IdleRace(reused bool, err error) bool {
	return reused && errors.Is(err, ErrNoResponse)
}

// WriteError returns err, a failed write of a request, wrapping ErrNoResponse when the
// peer had reset or closed the connection (EPIPE, ECONNRESET).
func WriteError(err error) error {
	if isReset(err) {
		return fmt.Errorf("%w: %w", ErrNoResponse, err)
	}
	return err
}
