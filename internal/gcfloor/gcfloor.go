package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the smallest heap goal a Floor allows.
const DefaultFloor = 64 << 20

// MaxPercent bounds the GOGC a Floor sets (a 640 KiB live heap reaches a 64 MiB floor).
const MaxPercent = 10000

// Percent is the GOGC that makes the heap goal at least floor for a live heap of live
// bytes, and never less than base (the GOGC the process had): base once live×(1 +
// base/100) reaches the floor by itself. An unknown (zero) live heap gets MaxPercent.
func Percent(live, floor uint64, base int) int {
	if base < 0 {
		return base // GC off stays off
	}
	if live == 0 {
		return max(base, MaxPercent)
	}
	if live*uint64(100+base) >= floor*100 {
		return base
	}
	// The smallest p with live×(100+p) >= floor×100.
	p := (floor*100+live-1)/live - 100
	return max(base, int(min(p, MaxPercent)))
}

// Floor is one user's request for a floor. GOGC is one setting per process, so the
// floors of all started Floors are applied together (the largest wins) and the GOGC the
// process had before the first Start comes back when the last one stops.
type Floor struct {
	floor uint64
}

// Option configures a Floor.
type Option func(*Floor)

// WithFloor sets the smallest heap goal in bytes (DefaultFloor).
func WithFloor(bytes uint64) Option { return func(f *Floor) { f.floor = bytes } }

// New returns a Floor that is not started.
func New(opts ...Option) *Floor {
	f := &Floor{floor: DefaultFloor}
	for _, o := range opts {
		o(f)
	}
	return f
}

// process is the driver's state: which floors are started, the GOGC to give back, and
// whether a cleanup is waiting for the next GC cycle.
var process = struct {
	mu     sync.Mutex
	active map[*startKey]uint64
	base   int
	armed  bool
	sample []metrics.Sample
}{active: map[*startKey]uint64{}, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}

type startKey struct{ _ byte }

// Start applies the floor until the returned stop is called (stop is idempotent). With
// GC off (GOGC=off) it does nothing.
func (f *Floor) Start() (stop func()) {
	p := &process
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.active) == 0 {
		base := debug.SetGCPercent(100)
		debug.SetGCPercent(base)
		if base < 0 {
			return func() {}
		}
		p.base = base
	}
	key := new(startKey)
	p.active[key] = f.floor
	adjustLocked()
	if !p.armed {
		p.armed = true
		arm()
	}
	var once sync.Once
	return func() { once.Do(func() { release(key) }) }
}

func release(key *startKey) {
	p := &process
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.active, key)
	if len(p.active) == 0 {
		debug.SetGCPercent(p.base)
	} else {
		adjustLocked()
	}
}

// arm registers a cleanup on a new object, which runs after the next cycle finds it
// unreachable: once per GC.
func arm() {
	s := new(sentinel) // has a pointer: never a tiny allocation, whose cleanup may not run
	runtime.AddCleanup(s, func(struct{}) { cycle() }, struct{}{})
}

type sentinel struct {
	_ *byte
	_ [8]byte
}

// cycle runs after a GC: set GOGC for the live heap it left, and wait for the next.
func cycle() {
	p := &process
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.active) == 0 {
		p.armed = false
		return
	}
	adjustLocked()
	arm()
}

func adjustLocked() {
	p := &process
	var floor uint64
	for _, f := range p.active {
		floor = max(floor, f)
	}
	metrics.Read(p.sample)
	var live uint64
	if p.sample[0].Value.Kind() == metrics.KindUint64 {
		live = p.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(Percent(live, floor, p.base))
}
