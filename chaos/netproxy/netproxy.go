package netproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Toxic types of toxiproxy v2.12.0 that Link.AddToxic accepts.
const (
	ToxicLatency   = "latency"    // latency, jitter (ms)
	ToxicBandwidth = "bandwidth"  // rate (KB/s)
	ToxicTimeout   = "timeout"    // timeout (ms; 0: black-hole forever)
	ToxicResetPeer = "reset_peer" // timeout (ms before the RST)
	ToxicSlicer    = "slicer"     // average_size, size_variation (bytes), delay (µs)
	ToxicLimitData = "limit_data" // bytes, then close
	ToxicSlowClose = "slow_close" // delay (ms)
)

// Streams a toxic applies to. Upstream is client → upstream (requests), downstream is
// upstream → client (responses).
const (
	Upstream   = "upstream"
	Downstream = "downstream"
)

// Errors.
var (
	ErrUnknownLink  = errors.New("netproxy: unknown link")
	ErrUnknownToxic = errors.New("netproxy: unknown toxic")
	ErrClosed       = errors.New("netproxy: closed")
)

// Toxic is one toxic to add to a link.
type Toxic struct {
	// Name identifies the toxic on its link; default "<type>_<stream>".
	Name string `json:"name"`
	Type string `json:"type"`
	// Stream is Upstream or Downstream (default Downstream, as in toxiproxy).
	Stream string `json:"stream"`
	// Toxicity is the probability (0..1) that a new connection gets the toxic; default 1.
	Toxicity float32 `json:"toxicity"`
	// Attributes are the type's attributes, e.g. {"latency": 200, "jitter": 20}.
	Attributes map[string]any `json:"attributes"`
}

// Counters are a link's byte and connection counts, live (updated per chunk, unlike
// toxiproxy's own metrics, which are added when a connection ends).
type Counters struct {
	// UpBytes entered the proxy from clients; DownBytes entered it from the upstream.
	UpBytes, DownBytes int64
	// Conns counts connections accepted (and dialled upstream).
	Conns int64
	// Dropped counts bytes lost when a toxic change interrupted a connection that did
	// not read what the proxy held for it within 5 s (toxiproxy's own bound).
	Dropped int64
}

// Links is a set of named TCP proxies, one per topology link ("router->decode-0").
// Its Hook method plugs into the launcher: the launcher asks for a proxy address in front
// of each upstream and gives that address to the process that dials the link.
type Links struct {
	server *toxiproxy.ApiServer
	id     int64
	host   string // the proxies' listen address

	mu     sync.Mutex
	links  map[string]*Link
	closed bool
}

// Link is one proxied link.
type Link struct {
	name  string
	proxy *toxiproxy.Proxy
	up    *counter
	down  *counter
	owner *Links
}

var (
	linksSeq          atomic.Int64
	muteGlobalZerolog sync.Once
)

// New returns an empty set of links. Proxy logs are discarded; toxiproxy's metrics go to
// a private registry.
func New() *Links { return NewOn("127.0.0.1") }

// NewOn is New with the proxies listening on host instead of 127.0.0.1 (e.g. a bridge
// address that processes in other network namespaces reach).
func NewOn(host string) *Links {
	// toxiproxy's bandwidth toxic logs through zerolog's global logger, which writes trace
	// lines to stderr by default; nothing else in pdsoak uses zerolog, so mute it here.
	muteGlobalZerolog.Do(func() { zlog.Logger = zerolog.Nop() })
	logger := zerolog.Nop()
	m := toxiproxy.NewMetricsContainer(prometheus.NewRegistry())
	return &Links{
		server: toxiproxy.NewServer(m, logger),
		id:     linksSeq.Add(1),
		links:  map[string]*Link{},
		host:   host,
	}
}

// Hook has the signature of launcher.Config.Links: it returns the proxy address for link
// in front of upstream, creating the proxy on first use. Called again for a link (after a
// restart moved the upstream) it re-targets the proxy and keeps its address when it can.
func (l *Links) Hook(link, upstream string) (string, error) {
	k, err := l.Add(link, upstream)
	if err != nil {
		return "", err
	}
	return k.Addr(), nil
}

// Add creates (or re-targets) the proxy for link and starts it on 127.0.0.1, port chosen
// by the kernel.
func (l *Links) Add(link, upstream string) (*Link, error) {
	if link == "" || strings.ContainsAny(link, " \t\n") {
		return nil, fmt.Errorf("netproxy: bad link name %q", link)
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("netproxy: link %s: bad upstream %q: %w", link, upstream, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if k := l.links[link]; k != nil {
		if k.proxy.Upstream == upstream {
			return k, nil
		}
		in := &toxiproxy.Proxy{Listen: k.Addr(), Upstream: upstream, Enabled: k.IsUp()}
		if err := k.proxy.Update(in); err != nil {
			return nil, fmt.Errorf("netproxy: link %s: re-target to %s: %w", link, upstream, err)
		}
		return k, nil
	}
	p := toxiproxy.NewProxy(l.server, link, net.JoinHostPort(l.host, "0"), upstream)
	k := &Link{name: link, proxy: p, owner: l, up: newCounter(), down: newCounter()}
	for _, c := range []struct {
		ctr    *counter
		stream string
	}{{k.up, Upstream}, {k.down, Downstream}} {
		body, _ := json.Marshal(map[string]any{
			"name": "pdsoak_counter_" + c.stream, "type": counterType, "stream": c.stream, "toxicity": 1,
			"attributes": map[string]any{"id": c.ctr.id},
		})
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			k.release()
			return nil, fmt.Errorf("netproxy: link %s: counter: %w", link, err)
		}
	}
	if err := l.server.Collection.Add(p, true); err != nil {
		k.release()
		return nil, fmt.Errorf("netproxy: link %s: start: %w", link, err)
	}
	l.links[link] = k
	return k, nil
}

// Link returns the named link.
func (l *Links) Link(name string) (*Link, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.links[name]
	if k == nil {
		return nil, fmt.Errorf("%w: %q (have %s)", ErrUnknownLink, name, strings.Join(l.namesLocked(), ", "))
	}
	return k, nil
}

// Names lists the links, sorted.
func (l *Links) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.namesLocked()
}

func (l *Links) namesLocked() []string {
	out := make([]string, 0, len(l.links))
	for n := range l.links {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Heal removes every toxic and brings every link up; a toxic removal still stuck when
// ctx ends is an error (see Link.RemoveToxic).
func (l *Links) Heal(ctx context.Context) error {
	l.mu.Lock()
	ks := make([]*Link, 0, len(l.links))
	for _, k := range l.links {
		ks = append(ks, k)
	}
	l.mu.Unlock()
	var errs []error
	for _, k := range ks {
		if err := k.ResetToxics(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := k.Up(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every proxy, closing their connections.
func (l *Links) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	err := l.server.Collection.Clear()
	for _, k := range l.links {
		k.release()
	}
	l.links = nil
	if err != nil {
		return fmt.Errorf("netproxy: close: %w", err)
	}
	return nil
}

// Name is the link's name.
func (k *Link) Name() string { return k.name }

// Addr is the proxy's listen address (host:port).
func (k *Link) Addr() string {
	k.proxy.Lock()
	defer k.proxy.Unlock()
	return k.proxy.Listen
}

// Upstream is the address the proxy dials.
func (k *Link) Upstream() string {
	k.proxy.Lock()
	defer k.proxy.Unlock()
	return k.proxy.Upstream
}

// Counters returns the link's live counters.
func (k *Link) Counters() Counters {
	return Counters{UpBytes: k.up.bytes.Load(), DownBytes: k.down.bytes.Load(), Conns: k.up.conns.Load(),
		Dropped: k.up.dropped.Load() + k.down.dropped.Load()}
}

// IsUp reports whether the proxy is accepting connections.
func (k *Link) IsUp() bool {
	k.proxy.Lock()
	defer k.proxy.Unlock()
	return k.proxy.Enabled
}

// Down stops the proxy: its listener closes (new connections are refused) and every open
// connection through it is closed. This is a network partition of the link.
func (k *Link) Down() error {
	k.proxy.Stop()
	return nil
}

// Up restarts a downed proxy on the same address.
func (k *Link) Up() error {
	k.proxy.Lock()
	enabled, listen, upstream := k.proxy.Enabled, k.proxy.Listen, k.proxy.Upstream
	k.proxy.Unlock()
	if enabled {
		return nil
	}
	if err := k.proxy.Update(&toxiproxy.Proxy{Listen: listen, Upstream: upstream, Enabled: true}); err != nil {
		return fmt.Errorf("netproxy: link %s: up: %w", k.name, err)
	}
	return nil
}

// AddToxic adds a toxic; it applies to connections opened from now on and, for most
// types, to open ones too (toxiproxy re-plumbs live links).
func (k *Link) AddToxic(t Toxic) error {
	switch t.Type {
	case ToxicLatency, ToxicBandwidth, ToxicTimeout, ToxicResetPeer, ToxicSlicer, ToxicLimitData, ToxicSlowClose:
	default:
		return fmt.Errorf("%w: %q", ErrUnknownToxic, t.Type)
	}
	if t.Stream == "" {
		t.Stream = Downstream
	}
	if t.Stream != Upstream && t.Stream != Downstream {
		return fmt.Errorf("netproxy: link %s: bad stream %q (upstream or downstream)", k.name, t.Stream)
	}
	if t.Toxicity == 0 {
		t.Toxicity = 1
	}
	if t.Name == "" {
		t.Name = t.Type + "_" + t.Stream
	}
	if strings.HasPrefix(t.Name, "pdsoak_counter") {
		return fmt.Errorf("netproxy: link %s: toxic name %q is reserved", k.name, t.Name)
	}
	if t.Attributes == nil {
		t.Attributes = map[string]any{}
	}
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("netproxy: link %s: %w", k.name, err)
	}
	if _, err := k.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("netproxy: link %s: add toxic %s: %w", k.name, t.Name, err)
	}
	return nil
}

// RemoveToxic removes the named toxic. It returns once the removal is done or ctx ends:
// toxiproxy's removal waits, holding the link's lock, for every connection's toxic to
// let go of the bytes it holds, and a connection nobody reads (or one closing at that
// moment, Shopify/toxiproxy#558) can make it wait for good. Then RemoveToxic fails with
// ctx's error and the removal goes on in the background, done if the connection moves.
func (k *Link) RemoveToxic(ctx context.Context, name string) error {
	what := "remove toxic " + name
	return k.call(ctx, what, func() error {
		if err := k.proxy.Toxics.RemoveToxic(ctx, name); err != nil {
			return fmt.Errorf("netproxy: link %s: %s: %w", k.name, what, err)
		}
		return nil
	})
}

// call runs f, a call into toxiproxy that can block for good (see RemoveToxic), and
// returns its error, or ctx's when ctx ends first, so that a revert fails visibly
// instead of hanging its caller. f keeps running in the background.
func (k *Link) call(ctx context.Context, what string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("netproxy: link %s: %s: %w", k.name, what, err)
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("netproxy: link %s: %s: toxiproxy still busy when the caller gave up "+
			"(a connection not reading holds the toxic; see Shopify/toxiproxy#558): %w", k.name, what, ctx.Err())
	}
}

// Toxics lists the names of the link's toxics (without the internal counters).
func (k *Link) Toxics() []string {
	var out []string
	for _, t := range k.proxy.Toxics.GetToxicArray() {
		if w, ok := t.(*toxics.ToxicWrapper); ok && !strings.HasPrefix(w.Name, "pdsoak_counter") {
			out = append(out, w.Name)
		}
	}
	sort.Strings(out)
	return out
}

// ResetToxics removes every toxic except the internal counters, giving up (with ctx's
// error) when ctx ends first, as RemoveToxic does.
func (k *Link) ResetToxics(ctx context.Context) error {
	return k.call(ctx, "reset toxics", func() error {
		var errs []error
		for _, n := range k.Toxics() { // takes the link's lock: inside the bounded call
			if err := k.proxy.Toxics.RemoveToxic(ctx, n); err != nil {
				errs = append(errs, fmt.Errorf("netproxy: link %s: remove toxic %s: %w", k.name, n, err))
			}
		}
		return errors.Join(errs...)
	})
}

func (k *Link) release() {
	counters.Delete(k.up.id)
	counters.Delete(k.down.id)
}
