package sim

import (
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"pdsoak/chaos/netproxy"
)

// Links: every TCP link of the embedded topology (router->prefill-i, router->decode-j,
// prefill-i->decode-j for KV) is a link carrying connections; a connection carries
// messages in two directions, each FIFO (TCP keeps order), each delayed by the link's
// one-way latency plus its toxics' latency (± jitter) and serialised at the toxics'
// bandwidth. Partitions and resets break connections as the fault proxy does: the peer
// sees a reset at once; new connections are refused while the link is partitioned.
//
// Defaults (loopback, what the real run's proxies add to it): one-way latency 50µs —
// a loopback TCP round trip through a user-space proxy measures 50–150µs — and no
// bandwidth bound on router links. The KV link moves bytes at 2 GB/s, a plausible rate
// for kvtransfer's Go sender over loopback (CRC32C and one write per frame); with the
// simtime store's 64 bytes per token per layer transfers are dominated by latency anyway.

// Directions on a connection: upstream is client to server (router→worker, decode→prefill
// on the KV link, as the proxy sees it), downstream the reverse.
const (
	up   = 0
	down = 1
)

// Link defaults.
const (
	DefaultLinkLatency = 50 * time.Microsecond
	DefaultKVBandwidth = 2e9 // bytes per second
)

// Transport errors a connection can end with; the harness maps them like the real
// client's transport errors (not HTTP statuses).
var (
	// ErrConnRefused: nothing accepts connections at the address (process down, link
	// partitioned).
	ErrConnRefused = errors.New("sim: connection refused")
	// ErrConnReset: the connection broke (process killed, partition, reset toxic).
	ErrConnReset = errors.New("sim: connection reset by peer")
)

type linkToxic struct {
	name     string
	typ      string
	streams  [2]bool
	toxicity float64
	latency  time.Duration
	jitter   time.Duration
	rate     float64 // bytes/s (bandwidth)
	after    time.Duration
}

type link struct {
	t        *topo
	name     string
	from, to string // process names (from is the proxy's client side)
	kv       bool
	base     time.Duration
	bw       float64 // bytes per second, 0: unbounded
	toxics   []*linkToxic
	cut      int // active partitions
	conns    []*conn
	counted  netproxy.Counters // as the proxy counts them: what chaos's toxic Verify reads
}

// conn is one TCP connection on a link.
type conn struct {
	l     *link
	alive bool
	// busy is when each direction's last byte leaves (bandwidth); last is the latest
	// arrival scheduled per direction (FIFO).
	busy, last [2]time.Time
	// affected[i]: toxic i of the link applies to this connection (toxicity draw).
	affected map[*linkToxic]bool
	reset    *Timer
	// onBreak is called once when the connection breaks (both ends' handlers).
	onBreak []func(error)
}

func (t *topo) newLink(name, from, to string, kv bool) *link {
	l := &link{t: t, name: name, from: from, to: to, kv: kv, base: DefaultLinkLatency}
	if kv {
		l.bw = DefaultKVBandwidth
	}
	t.links[name] = l
	t.linkOrder = append(t.linkOrder, l)
	return l
}

// dial opens a connection, or fails with ErrConnRefused while the link is partitioned
// or the server side is down (the caller checks the process).
func (l *link) dial() (*conn, error) {
	if l.cut > 0 {
		return nil, ErrConnRefused
	}
	c := &conn{l: l, alive: true}
	l.conns = append(l.conns, c)
	l.counted.Conns++
	for _, tx := range l.toxics {
		c.adopt(tx)
	}
	return c, nil
}

func (c *conn) adopt(tx *linkToxic) {
	if tx.toxicity < 1 && c.l.t.rng.Float64() >= tx.toxicity {
		return
	}
	if c.affected == nil {
		c.affected = map[*linkToxic]bool{}
	}
	c.affected[tx] = true
	if tx.typ == netproxy.ToxicResetPeer && c.reset == nil {
		c.reset = c.l.t.loop.After(tx.after, func() { c.breakNow(ErrConnReset) })
	}
}

// delay is when a message of n bytes sent now in direction dir arrives.
func (c *conn) arrival(dir, n int) time.Time {
	l := c.l
	now := l.t.loop.Now()
	lat := l.base
	rate := l.bw
	for _, tx := range l.toxics {
		if !tx.streams[dir] || !c.affected[tx] {
			continue
		}
		switch tx.typ {
		case netproxy.ToxicLatency:
			lat += tx.latency
			if tx.jitter > 0 {
				lat += time.Duration(l.t.rng.Int64N(int64(2*tx.jitter)+1)) - tx.jitter
			}
		case netproxy.ToxicBandwidth:
			if rate == 0 || tx.rate < rate {
				rate = tx.rate
			}
		}
	}
	start := now
	if c.busy[dir].After(start) {
		start = c.busy[dir]
	}
	if rate > 0 && n > 0 {
		start = start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
	}
	c.busy[dir] = start
	at := start.Add(max(lat, 0))
	if at.Before(c.last[dir]) {
		at = c.last[dir]
	}
	c.last[dir] = at
	return at
}

// send delivers fn at the far end after the link's delay, unless the connection broke
// meanwhile.
func (c *conn) send(dir, n int, fn func()) {
	if !c.alive {
		return
	}
	if dir == up {
		c.l.counted.UpBytes += int64(n)
	} else {
		c.l.counted.DownBytes += int64(n)
	}
	at := c.arrival(dir, n)
	c.l.t.loop.At(at, func() {
		if c.alive {
			fn()
		}
	})
}

// close ends the connection quietly (a normal close: no break handlers).
func (c *conn) close() {
	if !c.alive {
		return
	}
	c.alive = false
	c.l.t.loop.Stop(c.reset)
	c.l.drop(c)
}

// breakNow breaks the connection: both ends' handlers run now.
func (c *conn) breakNow(err error) {
	if !c.alive {
		return
	}
	c.close()
	for _, fn := range c.onBreak {
		fn(err)
	}
}

func (l *link) drop(c *conn) {
	if i := slices.Index(l.conns, c); i >= 0 {
		l.conns = slices.Delete(l.conns, i, i+1)
	}
}

// breakAll breaks every open connection (partition, process death).
func (l *link) breakAll(err error) {
	for len(l.conns) > 0 {
		l.conns[0].breakNow(err)
	}
}

// newRNG is a generator seeded from the scenario's seed and a stream label, so each
// consumer draws its own sequence whatever the others do.
func newRNG(seed int64, stream uint64) *rand.Rand {
	s := uint64(seed)
	return rand.New(rand.NewPCG(s^0x9e3779b97f4a7c15, stream*0xd1b54a32d192ed03+1))
}
