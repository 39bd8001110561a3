package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
)

// toxicFault adds toxics to every member link and proves them by the link's live byte
// counters: the toxics are in place, and bytes of each toxified stream (upstream bytes
// for an upstream toxic, downstream bytes for a downstream one) crossed a member link
// after its toxics were added.
type toxicFault struct {
	*base
	toxic   netproxy.Toxic // Name and Stream are filled per stream
	streams []string

	applied map[string]Link
	names   map[string][]string
	// before is each link's counters read after its last toxic was added: bytes counted
	// earlier entered the link before the toxic was there to act on them.
	before map[string]netproxy.Counters
	order  []string
}

// streamsParam reads stream: upstream, downstream or both.
func streamsParam(p *params, def string) []string {
	switch p.String("stream", def, netproxy.Upstream, netproxy.Downstream, "both") {
	case netproxy.Upstream:
		return []string{netproxy.Upstream}
	case netproxy.Downstream:
		return []string{netproxy.Downstream}
	default:
		return []string{netproxy.Upstream, netproxy.Downstream}
	}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// toxicityParam reads toxicity, the share of new connections that get the toxic, in
// (0, 1]. 0 is refused: a toxic on no connection acts on nothing, yet the link's bytes
// would still prove it (and netproxy reads a toxicity of 0 as its default, 1).
func toxicityParam(p *params) float32 {
	v, ok := p.get("toxicity")
	if !ok {
		return 1
	}
	f, ok := number(v)
	if !ok || !(f <= 1 && float32(f) > 0) { // NaN fails too; float32: what the proxy receives
		p.fail("toxicity", "must be a share of connections in (0, 1], got %v (0 puts the toxic on none)", v)
		return 1
	}
	return float32(f)
}

// newToxicType registers a catalogue type over one toxic. build reads the params into
// the toxic's attributes and returns the streams it applies to.
func newToxicType(name, doc, toxic string, paramDocs []string, build func(p *params) (map[string]any, []string)) Type {
	return Type{
		Name: name, Doc: doc, Targets: scenarios.TargetLink, Params: paramDocs,
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			toxicity := toxicityParam(p)
			attrs, streams := build(p)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &toxicFault{base: b, streams: streams,
				toxic: netproxy.Toxic{Type: toxic, Toxicity: toxicity, Attributes: attrs}}, nil
		},
	}
}

func init() {
	Register(Type{
		Name:    "network_toxic",
		Doc:     "add any toxiproxy toxic (latency, bandwidth, timeout, reset_peer, slicer, limit_data, slow_close) to links",
		Targets: scenarios.TargetLink,
		Params:  []string{"toxic: toxic type", "stream=downstream: upstream, downstream or both", "toxicity=1: share of connections affected, in (0, 1]", "other keys: the toxic's attributes (numbers)"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			typ := p.String("toxic", "", netproxy.ToxicLatency, netproxy.ToxicBandwidth, netproxy.ToxicTimeout,
				netproxy.ToxicResetPeer, netproxy.ToxicSlicer, netproxy.ToxicLimitData, netproxy.ToxicSlowClose)
			streams := streamsParam(p, netproxy.Downstream)
			toxicity := toxicityParam(p)
			attrs := p.Rest()
			for k, v := range attrs {
				f, ok := number(v)
				if !ok || f < 0 {
					p.fail(k, "toxic attributes must be non-negative numbers, got %v", v)
				}
				attrs[k] = int64(f)
			}
			if err := p.done(); err != nil {
				return nil, err
			}
			if typ == "" {
				return nil, errors.New("params.toxic: must be set")
			}
			return &toxicFault{base: b, streams: streams,
				toxic: netproxy.Toxic{Type: typ, Toxicity: toxicity, Attributes: attrs}}, nil
		},
	})
}

func (f *toxicFault) links(env Env) ([]string, map[string]Link, error) {
	members, err := f.members(env)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]Link{}
	for _, m := range members {
		k, err := env.Link(m)
		if err != nil {
			return nil, nil, f.wrap(err, "link %s (is the fault proxy on? reference.proxies)", m)
		}
		out[m] = k
	}
	return members, out, nil
}

func (f *toxicFault) toxicName(stream string) string {
	return "chaos_" + f.spec.Name + "_" + stream
}

func (f *toxicFault) Apply(_ context.Context, env Env) error {
	members, links, err := f.links(env)
	if err != nil {
		return err
	}
	f.applied, f.names, f.before = map[string]Link{}, map[string][]string{}, map[string]netproxy.Counters{}
	for _, m := range members {
		k := links[m]
		f.applied[m] = k
		f.order = append(f.order, m)
		for _, s := range f.streams {
			t := f.toxic
			t.Name, t.Stream = f.toxicName(s), s
			if err := k.AddToxic(t); err != nil {
				return f.wrap(err, "add %s toxic to %s", t.Type, m)
			}
			f.names[m] = append(f.names[m], t.Name)
		}
		// The baseline comes after the link's last AddToxic (which re-plumbs open
		// connections before it returns): every byte counted from here on enters the
		// link's chain with the toxics in it. Read before, it would let bytes that
		// crossed while the toxics were being added prove them.
		f.before[m] = k.Counters()
	}
	return nil
}

// streamBytes is how many bytes of stream entered the link between was and now.
func streamBytes(stream string, was, now netproxy.Counters) int64 {
	if stream == netproxy.Upstream {
		return now.UpBytes - was.UpBytes
	}
	return now.DownBytes - was.DownBytes
}

func (f *toxicFault) Verify(_ context.Context, _ Env) error {
	var moved []string
	for _, m := range f.order {
		k := f.applied[m]
		have := map[string]bool{}
		for _, n := range k.Toxics() {
			have[n] = true
		}
		for _, n := range f.names[m] {
			if !have[n] {
				return f.errorf("toxic %s is missing from link %s", n, m)
			}
		}
		// Only bytes of a toxic's own stream prove it: a toxic acts on the chunks of its
		// direction, so traffic the other way never met it. New connections (Conns) do not
		// count either: a connection that carries no bytes through the toxic was neither
		// delayed, throttled, sliced nor cut (reset_peer too waits for a chunk), and one
		// opened and closed at once (a dial probe) escapes a timeout's delay.
		now, was := k.Counters(), f.before[m]
		var got []string
		for _, s := range f.streams {
			if n := streamBytes(s, was, now); n > 0 {
				got = append(got, fmt.Sprintf("+%dB %s", n, s))
			}
		}
		if len(got) == len(f.streams) {
			moved = append(moved, m+": "+strings.Join(got, " "))
		}
	}
	stream := strings.Join(f.streams, " and ")
	if len(moved) == 0 {
		return f.errorf("%s toxic in place on %s, but no %s bytes have crossed it since it was added",
			f.toxic.Type, strings.Join(f.order, ","), stream)
	}
	sort.Strings(moved)
	f.evidence = fmt.Sprintf("%s toxic %v on %s; %s bytes through it since it was added: %s",
		f.toxic.Type, f.toxic.Attributes, strings.Join(f.order, ","), stream, strings.Join(moved, "; "))
	return nil
}

func (f *toxicFault) Revert(ctx context.Context, _ Env) error {
	var errs []error
	for _, m := range f.order {
		for _, n := range f.names[m] {
			if err := f.applied[m].RemoveToxic(ctx, n); err != nil {
				errs = append(errs, f.wrap(err, "remove toxic %s from %s", n, m))
			}
		}
	}
	f.applied, f.names, f.order = nil, nil, nil
	return errors.Join(errs...)
}

// partitionFault takes every member link down and proves it by dialling the proxy.
type partitionFault struct {
	*base
	applied map[string]Link
	order   []string
}

func (f *partitionFault) Apply(_ context.Context, env Env) error {
	members, err := f.members(env)
	if err != nil {
		return err
	}
	f.applied = map[string]Link{}
	for _, m := range members {
		k, err := env.Link(m)
		if err != nil {
			return f.wrap(err, "link %s (is the fault proxy on? reference.proxies)", m)
		}
		if err := k.Down(); err != nil {
			return f.wrap(err, "take %s down", m)
		}
		f.applied[m] = k
		f.order = append(f.order, m)
	}
	return nil
}

func (f *partitionFault) Verify(ctx context.Context, _ Env) error {
	for _, m := range f.order {
		k := f.applied[m]
		if k.IsUp() {
			return f.errorf("link %s is up again", m)
		}
		if dial(ctx, k) == nil {
			return f.errorf("link %s is down but %s still accepts connections", m, k.Addr())
		}
	}
	f.evidence = fmt.Sprintf("links %s down: dialling their proxies is refused", strings.Join(f.order, ","))
	return nil
}

func (f *partitionFault) Revert(_ context.Context, _ Env) error {
	var errs []error
	for _, m := range f.order {
		if err := f.applied[m].Up(); err != nil {
			errs = append(errs, f.wrap(err, "bring %s up", m))
		}
	}
	f.applied, f.order = nil, nil
	return errors.Join(errs...)
}

// Dialer is implemented by a Link that is no TCP proxy (the simulator's): a
// partition's proof dials through it instead of the network.
type Dialer interface {
	Dial(ctx context.Context) error
}

// dial opens (and closes) a connection to k's listening side.
func dial(ctx context.Context, k Link) error {
	if d, ok := k.(Dialer); ok {
		return d.Dial(ctx)
	}
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", k.Addr())
	if err == nil {
		c.Close()
	}
	return err
}
