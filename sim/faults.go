package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pdsoak/chaos"
	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
)

// Faults: every server-side type of the chaos catalogue has a simulated counterpart,
// read from chaos.Describe (the params parsed exactly as chaos parses them):
//
//	decode_crash, prefill_crash, process_kill  the process dies (its connections reset,
//	                                           its state is lost); revert restarts it
//	                                           after RestartDelay when restart is true
//	process_restart                            kill, then start again after RestartDelay
//	process_pause                              SIGSTOP: nothing runs, events wait; peers'
//	                                           KV heartbeats time out; SIGCONT on revert
//	network_latency, bandwidth_limit,          toxics on the link's connections (latency ±
//	connection_reset, network_toxic            jitter, bandwidth, reset_peer after a
//	(latency|bandwidth|reset_peer)             delay), per stream and toxicity
//	network_partition                          open connections reset, new ones refused
//	kv_transfer_stall/drop/corrupt,            the failpoint's terms evaluated by
//	scheduler_stall, bootstrap_stall,          failpoint.Fire where the real process
//	failpoint (those and engine/admit)         evaluates them (see worker.go, link_kv.go)
//
// kv_pool_exhaustion, queue_saturation (extra client load) and client_disconnect are
// client-side: the harness half carries them out with Submit and cancel (CanModel
// answers nil; Fault refuses them with ErrClientSide so they are never applied twice).
// Refused as ErrNotModelled: network_toxic's timeout, slicer, limit_data and slow_close
// toxics, and failpoints other than engine/admit, engine/step,
// kvtransfer/send-frame and kvtransfer/bootstrap.

// ErrClientSide: the fault is carried out by the harness side (client load, client
// disconnects), not by the topology.
var ErrClientSide = errors.New("sim: client-side fault: the harness applies it")

// IsClientSide reports whether f is a client-side fault type (burst load or client
// disconnects), which the harness side applies.
func IsClientSide(f scenarios.Fault) bool {
	m, err := chaos.Describe(f)
	return err == nil && (m.Kind == chaos.KindBurst || m.Kind == chaos.KindDisconnect)
}

// modelledPoints are the failpoints the simulated processes evaluate.
var modelledPoints = []string{failpoint.EngineAdmit, failpoint.EngineStep, failpoint.KVTransferSendFrame, failpoint.KVTransferBootstrap}

// CanModel implements Server.
func (t *topo) CanModel(f scenarios.Fault) error {
	_, _, err := t.plan(f)
	if errors.Is(err, ErrClientSide) {
		return nil
	}
	return err
}

// plan checks a fault and resolves its members.
func (t *topo) plan(f scenarios.Fault) (chaos.Model, []string, error) {
	m, err := chaos.Describe(f)
	if err != nil {
		return m, nil, fmt.Errorf("sim: fault %s: %w", f.Name, err)
	}
	if m.Kind == chaos.KindBurst || m.Kind == chaos.KindDisconnect {
		return m, nil, ErrClientSide
	}
	topo := t.sc.Topology()
	members := topo.Members(f.Target)
	if len(members) == 0 {
		return m, nil, fmt.Errorf("sim: fault %s (%s): target %q names nothing in this topology", f.Name, f.Type, f.Target)
	}
	notModelled := func(format string, args ...any) error {
		return fmt.Errorf("%w: fault %s (%s on %s): %s", ErrNotModelled, f.Name, f.Type, f.Target, fmt.Sprintf(format, args...))
	}
	switch m.Kind {
	case chaos.KindKill, chaos.KindPause, chaos.KindRestart, chaos.KindFailpoint:
		for _, name := range members {
			if _, ok := t.links[name]; ok {
				return m, nil, fmt.Errorf("sim: fault %s (%s): %s is a link, not a process", f.Name, f.Type, name)
			}
			role := ""
			switch {
			case name == ProcessRouter:
				role = "router"
			case t.worker(name) != nil:
				role = string(t.worker(name).role)
			default:
				return m, nil, fmt.Errorf("sim: fault %s (%s): process %q is unknown", f.Name, f.Type, name)
			}
			if len(m.Roles) > 0 && !slices.Contains(m.Roles, role) {
				return m, nil, fmt.Errorf("sim: fault %s (%s): %s is a %s; this fault needs %s", f.Name, f.Type, name, role, strings.Join(m.Roles, " or "))
			}
			if m.Kind == chaos.KindFailpoint && role == "router" {
				return m, nil, notModelled("the router evaluates no failpoints")
			}
		}
		if m.Kind == chaos.KindFailpoint {
			if !slices.Contains(modelledPoints, m.Point) {
				return m, nil, notModelled("failpoint %s is not evaluated by the simulated processes (modelled: %s)", m.Point, strings.Join(modelledPoints, ", "))
			}
			if _, err := failpoint.ParseTerms(m.Terms); err != nil {
				return m, nil, fmt.Errorf("sim: fault %s: %w", f.Name, err)
			}
		}
	case chaos.KindToxic, chaos.KindPartition:
		for _, name := range members {
			if _, ok := t.links[name]; !ok {
				return m, nil, fmt.Errorf("sim: fault %s (%s): %s is not a link of this topology", f.Name, f.Type, name)
			}
		}
		if m.Kind == chaos.KindToxic {
			switch m.Toxic.Type {
			case netproxy.ToxicLatency, netproxy.ToxicBandwidth, netproxy.ToxicResetPeer:
			default:
				return m, nil, notModelled("toxic %q (modelled: latency, bandwidth, reset_peer)", m.Toxic.Type)
			}
		}
	default:
		return m, nil, notModelled("kind %s", m.Kind)
	}
	return m, members, nil
}

// Fault implements Server.
func (t *topo) Fault(f scenarios.Fault) (func(), error) {
	m, members, err := t.plan(f)
	if err != nil {
		return nil, err
	}
	switch m.Kind {
	case chaos.KindKill:
		for _, name := range members {
			t.kill(name)
		}
		return once(func() {
			if m.Restart {
				for _, name := range members {
					t.start(name)
				}
			}
		}), nil
	case chaos.KindRestart:
		for _, name := range members {
			t.kill(name)
			t.start(name)
		}
		return func() {}, nil
	case chaos.KindPause:
		for _, name := range members {
			t.pause(name, true)
		}
		return once(func() {
			for _, name := range members {
				t.pause(name, false)
			}
		}), nil
	case chaos.KindPartition:
		for _, name := range members {
			l := t.links[name]
			l.cut++
			l.breakAll(ErrConnReset)
		}
		return once(func() {
			for _, name := range members {
				t.links[name].cut--
			}
		}), nil
	case chaos.KindToxic:
		var added []*linkToxic
		for _, name := range members {
			tx := newLinkToxic(f.Name, m)
			l := t.links[name]
			l.toxics = append(l.toxics, tx)
			for _, c := range slices.Clone(l.conns) {
				c.adopt(tx)
			}
			added = append(added, tx)
		}
		return once(func() {
			for i, name := range members {
				l := t.links[name]
				if k := slices.Index(l.toxics, added[i]); k >= 0 {
					l.toxics = slices.Delete(l.toxics, k, k+1)
				}
			}
		}), nil
	case chaos.KindFailpoint:
		chain, _ := failpoint.ParseTerms(m.Terms)
		var on []*worker
		for _, name := range members {
			w := t.worker(name)
			if !w.alive {
				continue
			}
			if w.fps == nil {
				w.fps = map[string]*fpState{}
			}
			w.fps[m.Point] = &fpState{chain: slices.Clone(chain)}
			on = append(on, w)
			w.wake()
		}
		inc := make([]int, len(on))
		for i, w := range on {
			inc[i] = w.inc
		}
		return once(func() {
			for i, w := range on {
				if w.inc != inc[i] {
					continue // the process restarted: its failpoints went with it
				}
				fp := w.fps[m.Point]
				delete(w.fps, m.Point)
				if fp != nil {
					for _, fn := range fp.waiters {
						fn()
					}
				}
			}
		}), nil
	}
	return nil, fmt.Errorf("%w: fault %s", ErrNotModelled, f.Name)
}

func newLinkToxic(name string, m chaos.Model) *linkToxic {
	tx := &linkToxic{name: name, typ: m.Toxic.Type, toxicity: float64(m.Toxic.Toxicity)}
	for _, s := range m.Streams {
		if s == netproxy.Upstream {
			tx.streams[up] = true
		} else {
			tx.streams[down] = true
		}
	}
	ms := func(k string) time.Duration {
		switch v := m.Toxic.Attributes[k].(type) {
		case int64:
			return time.Duration(v) * time.Millisecond
		case int:
			return time.Duration(v) * time.Millisecond
		}
		return 0
	}
	tx.latency, tx.jitter, tx.after = ms("latency"), ms("jitter"), ms("timeout")
	switch v := m.Toxic.Attributes["rate"].(type) {
	case int:
		tx.rate = float64(v) * 1024
	case int64:
		tx.rate = float64(v) * 1024
	}
	return tx
}

func once(fn func()) func() {
	done := false
	return func() {
		if !done {
			done = true
			fn()
		}
	}
}

func (t *topo) kill(name string) {
	if name == ProcessRouter {
		t.router.crash()
		return
	}
	t.worker(name).crash()
}

// start brings a killed process back after RestartDelay.
func (t *topo) start(name string) {
	t.loop.After(RestartDelay, func() {
		if name == ProcessRouter {
			if !t.router.alive {
				t.router.restart()
			}
			return
		}
		if w := t.worker(name); !w.alive {
			_ = w.boot() // the configuration booted once already
		}
	})
}

func (t *topo) pause(name string, on bool) {
	if name == ProcessRouter {
		r := t.router
		if on {
			r.paused = r.alive
			return
		}
		if r.paused {
			r.paused = false
			d := r.deferred
			r.deferred = nil
			for _, fn := range d {
				fn()
			}
		}
		return
	}
	if on {
		t.worker(name).pause()
	} else {
		t.worker(name).resume()
	}
}
