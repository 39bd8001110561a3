package chaos

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"pdsoak/scenarios"
)

// Evidencer is implemented by faults that can say what proved them (for the Detail of
// the fault_verified event).
type Evidencer interface {
	Evidence() string
}

// base holds what every fault instance keeps: its spec and the evidence of its last
// successful Verify.
type base struct {
	spec     scenarios.Fault
	evidence string
}

func (b *base) Evidence() string { return b.evidence }

func (b *base) errorf(format string, args ...any) error {
	return fmt.Errorf("chaos: %s (%s on %s): %s", b.spec.Name, b.spec.Type, b.spec.Target, fmt.Sprintf(format, args...))
}

func (b *base) wrap(err error, format string, args ...any) error {
	return fmt.Errorf("chaos: %s (%s on %s): %s: %w", b.spec.Name, b.spec.Type, b.spec.Target, fmt.Sprintf(format, args...), err)
}

// members expands the target, failing when it names nothing.
func (b *base) members(env Env) ([]string, error) {
	m := env.Members(b.spec.Target)
	if len(m) == 0 {
		return nil, b.errorf("target %q names nothing in this environment", b.spec.Target)
	}
	return m, nil
}

// checkRole checks that a process has one of the roles (none: any). When the Env cannot
// describe processes the check is skipped.
func (b *base) checkRole(env Env, name string, roles []string) error {
	if len(roles) == 0 {
		return nil
	}
	p, err := env.Process(name)
	if errors.Is(err, ErrUnsupported) {
		return nil
	}
	if err != nil {
		return b.wrap(err, "process %s", name)
	}
	return b.roleErr(name, p.Role, roles)
}

// roleErr is the one role rule: process name's role must be one of roles (none: any).
func (b *base) roleErr(name, role string, roles []string) error {
	if len(roles) == 0 || slices.Contains(roles, role) {
		return nil
	}
	return b.errorf("process %s has role %q; this fault needs %s", name, role, strings.Join(roles, " or "))
}

// CheckTarget checks spec's target in env as Apply will, without applying anything:
// the target names members, each a process env knows (unless env cannot describe
// processes), each with a role the fault accepts. The simulator calls it to refuse a run
// up front rather than halfway.
func CheckTarget(spec scenarios.Fault, env Env) error {
	m, err := Describe(spec)
	if err != nil {
		return err
	}
	b := &base{spec: spec}
	members, err := b.members(env)
	if err != nil {
		return err
	}
	for _, name := range members {
		p, err := env.Process(name)
		if errors.Is(err, ErrUnsupported) {
			continue
		}
		if err != nil {
			return b.wrap(err, "process %s", name)
		}
		if err := b.roleErr(name, p.Role, m.Roles); err != nil {
			return err
		}
	}
	return nil
}

// newBase builds a base and a params reader for a constructor.
func newBase(spec scenarios.Fault) (*base, *params) {
	return &base{spec: spec}, newParams(spec.Params)
}
