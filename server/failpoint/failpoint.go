package failpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Names of the failpoints the reference server evaluates. See doc.go for what each does.
const (
	EngineStep          = "engine/step"
	EngineAdmit         = "engine/admit"
	KVTransferSendFrame = "kvtransfer/send-frame"
	KVTransferBootstrap = "kvtransfer/bootstrap"
)

// Errors returned by the registry.
var (
	ErrNotEnabled = errors.New("failpoint: not enabled")
	ErrBadName    = errors.New("failpoint: bad name")
)

// MaxNameLen bounds failpoint names.
const MaxNameLen = 128

// DefaultSeed seeds the percentage draws of a registry made without WithSeed.
const DefaultSeed = 1

// Status describes one failpoint: its current terms and its counters.
type Status struct {
	Name string `json:"name"`
	// Terms is the chain as given to Enable; empty when disabled.
	Terms   string `json:"terms"`
	Enabled bool   `json:"enabled"`
	// Evals counts evaluations while enabled; Hits counts evaluations where a term other
	// than "off" fired. Both restart at 0 on Enable and survive Disable.
	Evals int64 `json:"evals"`
	Hits  int64 `json:"hits"`
	// Paused is the number of goroutines blocked in a pause right now.
	Paused int64 `json:"paused"`
	// Sleeping is the number of goroutines in a sleep right now.
	Sleeping int64 `json:"sleeping"`
}

// Registry holds failpoints. The zero value is not usable; call NewRegistry. Most code uses
// the package-level functions, which act on Default.
type Registry struct {
	active atomic.Int64 // number of enabled failpoints: the fast path of Eval

	mu  sync.RWMutex
	fps map[string]*point

	rngMu sync.Mutex
	rng   *rand.Rand

	logger *slog.Logger
}

type point struct {
	name string

	mu      sync.Mutex
	changed chan struct{} // closed when the terms change or the point is disabled

	State // its terms and counters (state.go)
}

// Option configures a Registry.
type Option func(*Registry)

// WithSeed seeds the generator used for percentage modifiers.
func WithSeed(seed uint64) Option {
	return func(r *Registry) { r.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// WithLogger sets the logger used by "print" and by Enable/Disable (default: slog.Default()
// at the time of the call).
func WithLogger(l *slog.Logger) Option { return func(r *Registry) { r.logger = l } }

// NewRegistry returns an empty registry.
func NewRegistry(opts ...Option) *Registry {
	r := &Registry{fps: map[string]*point{}}
	WithSeed(DefaultSeed)(r)
	for _, o := range opts {
		o(r)
	}
	return r
}

// Default is the process-wide registry used by the package-level functions.
var Default = NewRegistry()

// Eval evaluates a failpoint on Default. See Registry.Eval.
func Eval(ctx context.Context, name string) (string, error) { return Default.Eval(ctx, name) }

// Enable sets a failpoint's terms on Default.
func Enable(name, terms string) error { return Default.Enable(name, terms) }

// Disable clears a failpoint on Default.
func Disable(name string) error { return Default.Disable(name) }

// List describes every failpoint Default knows, sorted by name.
func List() []Status { return Default.List() }

// Hits returns how many times a failpoint of Default fired since it was last enabled.
func Hits(name string) int64 { return Default.Hits(name) }

// Get describes one failpoint of Default.
func Get(name string) (Status, bool) { return Default.Get(name) }

// EnableSpec enables failpoints on Default from a gofail-style list "name=terms;name=terms".
func EnableSpec(spec string) error { return Default.EnableSpec(spec) }

// Eval evaluates the named failpoint. It is the only call on the hot path: when no
// failpoint of the registry is enabled it costs one atomic load.
//
// Results:
//   - ("", nil): nothing to do. The failpoint is not enabled, or no term fired (an "off"
//     term, counts exhausted, a percentage draw missed), or a sleep / pause / print term
//     fired and has already been carried out. A bare "return" or "return()" also yields
//     ("", nil) — use return(x) with an argument when the caller must act.
//   - (arg, nil): a return(arg) term fired; the caller acts on arg.
//   - ("", err): ctx ended while sleeping or pausing; err wraps ctx.Err(). Callers should
//     stop what they were doing.
//
// A sleep or pause ends early when the failpoint is disabled or re-enabled, so Disable
// always releases every goroutine held by a failpoint. A "panic" term panics.
func (r *Registry) Eval(ctx context.Context, name string) (string, error) {
	if r.active.Load() == 0 {
		return "", nil
	}
	r.mu.RLock()
	p := r.fps[name]
	r.mu.RUnlock()
	if p == nil {
		return "", nil
	}
	p.mu.Lock()
	fired := p.Fire(r.draw)
	if fired == nil {
		p.mu.Unlock()
		return "", nil
	}
	act, arg, sleep, changed := fired.Action, fired.Arg, fired.Sleep, p.changed
	p.mu.Unlock()

	if ctx == nil {
		ctx = context.Background()
	}
	switch act {
	case ActReturn:
		return arg, nil
	case ActPrint:
		r.log().Info("failpoint hit", "failpoint", name, "arg", arg)
		return "", nil
	case ActPanic:
		if arg != "" {
			panic(fmt.Sprintf("failpoint panic: %s: %s", name, arg))
		}
		panic("failpoint panic: " + name)
	case ActSleep:
		defer p.Hold(act)()
		tm := time.NewTimer(sleep)
		defer tm.Stop()
		select {
		case <-tm.C:
			return "", nil
		case <-changed:
			return "", nil
		case <-ctx.Done():
			return "", fmt.Errorf("failpoint: %s: sleep: %w", name, ctx.Err())
		}
	case ActPause:
		defer p.Hold(act)()
		select {
		case <-changed:
			return "", nil
		case <-ctx.Done():
			return "", fmt.Errorf("failpoint: %s: pause: %w", name, ctx.Err())
		}
	}
	return "", nil
}

func (r *Registry) log() *slog.Logger {
	if r.logger != nil {
		return r.logger
	}
	return slog.Default()
}

func (r *Registry) draw(percent float64) bool { return Draw(percent, r.uniform) }

func (r *Registry) uniform() float64 {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.Float64()
}

// ValidName reports whether name is acceptable: 1..MaxNameLen bytes of [A-Za-z0-9/_.-].
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '/' || c == '_' || c == '.' || c == '-':
		default:
			return false
		}
	}
	return true
}

// Enable parses terms and installs them on the named failpoint, replacing any terms it had.
// Counters restart at zero, and goroutines held by the old terms (sleep, pause) are released.
func (r *Registry) Enable(name, terms string) error {
	if !ValidName(name) {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	chain, err := ParseTerms(terms)
	if err != nil {
		return err
	}
	r.mu.Lock()
	p := r.fps[name]
	if p == nil {
		p = &point{name: name}
		r.fps[name] = p
	}
	r.mu.Unlock()

	p.mu.Lock()
	if p.Enabled() {
		close(p.changed)
	} else {
		r.active.Add(1)
	}
	p.State.Enable(terms, chain)
	p.changed = make(chan struct{})
	desc := p.Terms()
	p.mu.Unlock()
	r.log().Info("failpoint enabled", "failpoint", name, "terms", desc)
	return nil
}

// Disable clears the named failpoint and releases every goroutine it holds. Its counters
// stay readable until the next Enable. It returns an error wrapping ErrNotEnabled when the
// failpoint was not enabled.
func (r *Registry) Disable(name string) error {
	r.mu.RLock()
	p := r.fps[name]
	r.mu.RUnlock()
	if p == nil {
		return fmt.Errorf("%w: %q", ErrNotEnabled, name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.Enabled() {
		return fmt.Errorf("%w: %q", ErrNotEnabled, name)
	}
	p.State.Disable()
	close(p.changed)
	p.changed = nil
	r.active.Add(-1)
	r.log().Info("failpoint disabled", "failpoint", name)
	return nil
}

// DisableAll clears every enabled failpoint.
func (r *Registry) DisableAll() {
	for _, s := range r.List() {
		if s.Enabled {
			_ = r.Disable(s.Name)
		}
	}
}

// EnableSpec enables failpoints from a gofail-style list "name=terms;name=terms" (the format
// of GOFAIL_FAILPOINTS). Empty entries are ignored. It stops at the first error.
func (r *Registry) EnableSpec(spec string) error {
	for _, kv := range strings.Split(spec, ";") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, terms, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("failpoint: bad spec entry %q: want name=terms", kv)
		}
		if err := r.Enable(strings.TrimSpace(name), terms); err != nil {
			return err
		}
	}
	return nil
}

// Get describes the named failpoint; ok is false when the registry never saw it.
func (r *Registry) Get(name string) (Status, bool) {
	r.mu.RLock()
	p := r.fps[name]
	r.mu.RUnlock()
	if p == nil {
		return Status{Name: name}, false
	}
	return p.status(), true
}

// Hits returns how many times the failpoint fired (a term other than "off") since it was
// last enabled; 0 for an unknown failpoint.
func (r *Registry) Hits(name string) int64 {
	s, _ := r.Get(name)
	return s.Hits
}

// List describes every failpoint the registry knows, sorted by name.
func (r *Registry) List() []Status {
	r.mu.RLock()
	out := make([]Status, 0, len(r.fps))
	for _, p := range r.fps {
		out = append(out, p.status())
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (p *point) status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Describe(p.name)
}
