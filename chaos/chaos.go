package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"pdsoak/scenarios"
)

// Fault is one scheduled fault instance, built by New from a scenario's fault spec. The
// timeline calls Apply once, then Verify until it succeeds or the verify timeout passes,
// then Revert once (also after a failed Apply or Verify, and on cancel). Revert must be
// safe to call when Apply failed part-way.
type Fault interface {
	// Apply injects the fault.
	Apply(ctx context.Context, env Env) error
	// Verify proves the fault took effect (failpoint hits, /proc state and the process's
	// server probed, proxy counters, load statistics). It returns an error while there
	// is no proof yet; the timeline polls it.
	Verify(ctx context.Context, env Env) error
	// Revert undoes the fault.
	Revert(ctx context.Context, env Env) error
}

// Type is a registered fault type.
type Type struct {
	// Name is what scenarios write in a fault's type.
	Name string
	// Doc is a one-line description, shown by `harness faults`.
	Doc string
	// Targets are the kinds of target it accepts.
	Targets scenarios.TargetKind
	// Params documents the accepted params, "name=default: meaning", for help output.
	Params []string
	// New builds an instance from a spec, checking its params (not its target, which
	// needs the topology).
	New func(spec scenarios.Fault) (Fault, error)
}

// Errors.
var (
	// ErrUnknownType: the spec names a type nobody registered.
	ErrUnknownType = errors.New("chaos: unknown fault type")
	// ErrBadSpec: the spec's target or params are wrong.
	ErrBadSpec = errors.New("chaos: bad fault spec")
	// ErrNotVerified: a fault was applied but no proof that it took effect came within
	// the verify timeout. The harness turns it into exit 3: a silent no-op must never
	// look like a pass.
	ErrNotVerified = errors.New("chaos: fault did not take effect")
	// ErrUnsupported: the Env cannot do what the fault needs (for example no proxy on a
	// link, no failpoint admin API on an external server).
	ErrUnsupported = errors.New("chaos: not supported by this environment")
)

var (
	regMu    sync.RWMutex
	registry = map[string]Type{}
)

// Register adds a fault type. It panics on an empty or duplicate name or a nil New,
// since registration happens in init functions.
func Register(t Type) {
	if t.Name == "" || t.New == nil {
		panic("chaos: Register: type needs a name and a constructor")
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[t.Name]; dup {
		panic("chaos: Register: duplicate fault type " + t.Name)
	}
	registry[t.Name] = t
}

// Types lists the registered types, sorted by name.
func Types() []Type {
	regMu.RLock()
	out := make([]Type, 0, len(registry))
	for _, t := range registry {
		out = append(out, t)
	}
	regMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the named type.
func Lookup(name string) (Type, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	t, ok := registry[name]
	return t, ok
}

// KnownTypes returns the set of registered type names.
func KnownTypes() map[string]bool {
	out := map[string]bool{}
	for _, t := range Types() {
		out[t.Name] = true
	}
	return out
}

// FaultTypes returns the registry in the form scenarios.WithFaultTypes takes, so that
// scenario validation checks types, target kinds and params without importing chaos:
//
//	sc.Validate(scenarios.WithFaultTypes(chaos.FaultTypes()))
func FaultTypes() map[string]scenarios.FaultType {
	out := map[string]scenarios.FaultType{}
	for _, t := range Types() {
		out[t.Name] = scenarios.FaultType{
			Targets: t.Targets,
			Check: func(f scenarios.Fault) error {
				_, err := t.New(f)
				return err
			},
		}
	}
	return out
}

func typeNames() string {
	var names []string
	for _, t := range Types() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// New builds the fault a spec describes.
func New(spec scenarios.Fault) (Fault, error) {
	t, ok := Lookup(spec.Type)
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownType, spec.Type, typeNames())
	}
	f, err := t.New(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s): %w", ErrBadSpec, spec.Name, spec.Type, err)
	}
	return f, nil
}

// ValidateSpec checks a spec against the registry and a list of target names (concrete
// or role names, as scenarios.Topology.Names lists them; nil skips the target check).
func ValidateSpec(spec scenarios.Fault, targets []string) error {
	label := spec.Name
	if label == "" {
		label = spec.Type
	}
	if spec.Type == "" {
		return fmt.Errorf("%w: %s: type must be set (known: %s)", ErrBadSpec, label, typeNames())
	}
	if _, ok := Lookup(spec.Type); !ok {
		return fmt.Errorf("%w: %s: %w %q (known: %s)", ErrBadSpec, label, ErrUnknownType, spec.Type, typeNames())
	}
	if spec.Target == "" {
		return fmt.Errorf("%w: %s: target must be set (one of: %s)", ErrBadSpec, label, strings.Join(targets, ", "))
	}
	if targets != nil {
		found := false
		for _, t := range targets {
			if t == spec.Target {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%w: %s: target %q does not exist (have: %s)", ErrBadSpec, label, spec.Target, strings.Join(targets, ", "))
		}
	}
	if spec.At < 0 || spec.For < 0 {
		return fmt.Errorf("%w: %s: at and for must be ≥ 0", ErrBadSpec, label)
	}
	_, err := New(spec)
	return err
}
