package chaos

import (
	"fmt"
	"slices"

	"pdsoak/chaos/netproxy"
	"pdsoak/scenarios"
)

// Kinds of Model: what mechanism a catalogue fault uses.
const (
	KindKill       = "kill"       // SIGKILL, restart on revert when Restart
	KindPause      = "pause"      // SIGSTOP, SIGCONT on revert
	KindRestart    = "restart"    // kill and start again at once
	KindToxic      = "toxic"      // a toxiproxy toxic on links
	KindPartition  = "partition"  // a link's proxy refuses and cuts connections
	KindFailpoint  = "failpoint"  // a failpoint with gofail terms on processes
	KindBurst      = "burst"      // extra client load (kv_pool_exhaustion, queue_saturation)
	KindDisconnect = "disconnect" // client-side cancels
)

// Model is what a fault spec does, as data: its params parsed exactly as New parses
// them. A driver that carries faults out itself (the simulator, package sim) reads it
// instead of parsing params a second time.
type Model struct {
	Type string
	Kind string
	// Roles restricts the target processes (nil: any).
	Roles []string
	// Restart (KindKill): start the process again on revert.
	Restart bool
	// Toxic and Streams (KindToxic): the toxic's type, toxicity and attributes as the
	// proxy receives them (milliseconds, KB/s), and the streams it applies to.
	Toxic   netproxy.Toxic
	Streams []string
	// Point and Terms (KindFailpoint): the failpoint and its gofail terms.
	Point, Terms string
	// Burst and MinUsage (KindBurst); Disconnect (KindDisconnect).
	Burst      Burst
	MinUsage   float64
	Disconnect Disconnect
}

// Describe parses a spec (New's checks and errors) and returns its Model.
func Describe(spec scenarios.Fault) (Model, error) {
	f, err := New(spec)
	if err != nil {
		return Model{}, err
	}
	m := Model{Type: spec.Type}
	switch f := f.(type) {
	case *killFault:
		m.Kind, m.Roles, m.Restart = KindKill, slices.Clone(f.roles), f.restart
	case *pauseFault:
		m.Kind = KindPause
	case *restartFault:
		m.Kind = KindRestart
	case *toxicFault:
		m.Kind, m.Toxic, m.Streams = KindToxic, f.toxic, slices.Clone(f.streams)
	case *partitionFault:
		m.Kind = KindPartition
	case *failpointFault:
		m.Kind, m.Point, m.Terms, m.Roles = KindFailpoint, f.point, f.terms, slices.Clone(f.roles)
	case *burstFault:
		m.Kind, m.Burst, m.MinUsage = KindBurst, f.burst, f.usage
	case *disconnectFault:
		m.Kind, m.Disconnect = KindDisconnect, f.d
	default:
		return Model{}, fmt.Errorf("chaos: %s (%s): no model of %T", spec.Name, spec.Type, f)
	}
	return m, nil
}
