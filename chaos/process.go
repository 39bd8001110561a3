package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"pdsoak/scenarios"
	"pdsoak/supervisor"
)

// killFault SIGKILLs every member process and proves it twice: from /proc (the pid is
// gone or a zombie) and, when the process has a URL, by its HTTP server no longer
// answering (a refused connection or a failed request). The pid alone proves nothing
// about a server outside the signalled process group (`docker run`'s container, a
// launcher that calls setsid): the launcher dies while the server keeps serving. Revert
// restarts them unless restart is false.
type killFault struct {
	*base
	roles   []string
	restart bool

	killed   map[string]Process
	order    []string
	unprobed map[string]string // answeringBefore's reasons
}

func newKillType(name, doc string, roles []string) Type {
	return Type{
		Name: name, Doc: doc, Targets: scenarios.TargetProcess,
		Params: []string{"restart=true: restart the process when the fault is reverted"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			restart := p.Bool("restart", true)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &killFault{base: b, roles: roles, restart: restart}, nil
		},
	}
}

// processes resolves the members to running processes, checking roles.
func (b *base) processes(env Env, roles []string) ([]Process, error) {
	members, err := b.members(env)
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, m := range members {
		p, err := env.Process(m)
		if err != nil {
			return nil, b.wrap(err, "process %s", m)
		}
		if err := b.roleErr(m, p.Role, roles); err != nil {
			return nil, err
		}
		if p.PID <= 0 {
			return nil, b.errorf("process %s is not running (no pid)", m)
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *killFault) Apply(ctx context.Context, env Env) error {
	procs, err := f.processes(env, f.roles)
	if err != nil {
		return err
	}
	f.killed, f.unprobed = map[string]Process{}, answeringBefore(ctx, env, procs)
	for _, p := range procs {
		if err := env.Signal(p.Name, syscall.SIGKILL); err != nil {
			return f.wrap(err, "SIGKILL %s (pid %d)", p.Name, p.PID)
		}
		f.killed[p.Name] = p
		f.order = append(f.order, p.Name)
	}
	return nil
}

func (f *killFault) Verify(ctx context.Context, env Env) error {
	procs := make([]Process, len(f.order))
	dead := make([]string, len(f.order))
	for i, m := range f.order {
		p := f.killed[m]
		ok, st, err := alive(env, p.PID)
		if err != nil {
			return f.wrap(err, "state of %s", m)
		}
		if ok {
			return f.errorf("%s (pid %d) is still alive after SIGKILL (state %s)", m, p.PID, st)
		}
		procs[i], dead[i] = p, fmt.Sprintf("pid %d gone", p.PID)
		if st == supervisor.StateZombie {
			dead[i] = fmt.Sprintf("pid %d a zombie", p.PID)
		}
	}
	dead, err := f.serversSilent(ctx, env, procs, dead, f.unprobed, "SIGKILL")
	if err != nil {
		return err
	}
	f.evidence = "killed: " + strings.Join(dead, "; ")
	return nil
}

func (f *killFault) Revert(ctx context.Context, env Env) error {
	defer func() { f.killed, f.order = nil, nil }()
	if !f.restart {
		return nil
	}
	var errs []error
	for _, m := range f.order {
		if err := env.Restart(ctx, m); err != nil {
			errs = append(errs, f.wrap(err, "restart %s", m))
		}
	}
	return errors.Join(errs...)
}

// pauseFault SIGSTOPs every member and proves it twice: state T in /proc and, when the
// process has a URL, its HTTP server silent (a GET gets no response within
// ServerProbeTimeout; a dial proves nothing, since a stopped process's kernel still
// accepts connections). Revert SIGCONTs them and waits (bounded) until they leave state T.
type pauseFault struct {
	*base
	stopped  map[string]Process
	order    []string
	unprobed map[string]string // answeringBefore's reasons
}

// serversSilent probes procs' servers after sig: an error when one still answers (the
// signal missed the server), else each process's evidence, "NAME: STATE; PROBE"
// (states[i] is what /proc showed; unprobed says why a server was not probed).
func (b *base) serversSilent(ctx context.Context, env Env, procs []Process, states []string, unprobed map[string]string, sig string) ([]string, error) {
	probes, err := probeServers(ctx, env, procs)
	if err != nil {
		return nil, b.wrap(err, "probe the servers after %s", sig)
	}
	out := make([]string, len(procs))
	for i, pr := range probes {
		name := procs[i].Name
		if pr.answered {
			return nil, b.errorf("%s: %s, but %s: the server is another process that %s did not reach (outside the process group: a container, a setsid launcher?)",
				name, states[i], pr.says(""), sig)
		}
		out[i] = fmt.Sprintf("%s: %s; %s", name, states[i], pr.says(unprobed[name]))
	}
	return out, nil
}

func stoppedState(st supervisor.State) bool { return st == supervisor.StateStopped }

func (f *pauseFault) Apply(ctx context.Context, env Env) error {
	procs, err := f.processes(env, nil)
	if err != nil {
		return err
	}
	f.stopped, f.unprobed = map[string]Process{}, answeringBefore(ctx, env, procs)
	for _, p := range procs {
		if err := env.Signal(p.Name, syscall.SIGSTOP); err != nil {
			return f.wrap(err, "SIGSTOP %s (pid %d)", p.Name, p.PID)
		}
		f.stopped[p.Name] = p
		f.order = append(f.order, p.Name)
	}
	return nil
}

func (f *pauseFault) Verify(ctx context.Context, env Env) error {
	procs, states := make([]Process, len(f.order)), make([]string, len(f.order))
	for i, m := range f.order {
		p := f.stopped[m]
		st, err := envProcState(env, p.PID)
		if err != nil {
			return f.wrap(err, "state of %s", m)
		}
		if !stoppedState(st) {
			return f.errorf("%s (pid %d) is in state %s, not stopped", m, p.PID, st)
		}
		procs[i], states[i] = p, fmt.Sprintf("pid %d in state T", p.PID)
	}
	out, err := f.serversSilent(ctx, env, procs, states, f.unprobed, "SIGSTOP")
	if err != nil {
		return err
	}
	f.evidence = "stopped: " + strings.Join(out, "; ")
	return nil
}

func (f *pauseFault) Revert(ctx context.Context, env Env) error {
	var errs []error
	for _, m := range f.order {
		pid := f.stopped[m].PID
		if err := env.Signal(m, syscall.SIGCONT); err != nil {
			errs = append(errs, f.wrap(err, "SIGCONT %s", m))
			continue
		}
		if err := waitState(ctx, env, pid, func(st supervisor.State, gone bool) bool { return gone || !stoppedState(st) }); err != nil {
			errs = append(errs, f.wrap(err, "%s (pid %d) did not resume", m, pid))
		}
	}
	f.stopped, f.order = nil, nil
	return errors.Join(errs...)
}

// waitState polls /proc until cond holds, for at most 5 s or until ctx ends.
func waitState(ctx context.Context, env Env, pid int, cond func(st supervisor.State, gone bool) bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := envProcState(env, pid)
		gone := errors.Is(err, ErrNoProcess)
		if err != nil && !gone {
			return err
		}
		if cond(st, gone) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: pid %d still in state %s", pid, st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// restartFault restarts every member and proves it by a new, live pid.
type restartFault struct {
	*base
	old   map[string]int
	order []string
}

func (f *restartFault) Apply(ctx context.Context, env Env) error {
	procs, err := f.processes(env, nil)
	if err != nil {
		return err
	}
	f.old = map[string]int{}
	for _, p := range procs {
		f.old[p.Name] = p.PID
		f.order = append(f.order, p.Name)
		if err := env.Restart(ctx, p.Name); err != nil {
			return f.wrap(err, "restart %s", p.Name)
		}
	}
	return nil
}

func (f *restartFault) Verify(_ context.Context, env Env) error {
	var out []string
	for _, m := range f.order {
		p, err := env.Process(m)
		if err != nil {
			return f.wrap(err, "process %s", m)
		}
		if p.PID <= 0 || p.PID == f.old[m] {
			return f.errorf("%s still has pid %d after restart", m, p.PID)
		}
		ok, st, err := alive(env, p.PID)
		if err != nil {
			return f.wrap(err, "state of %s", m)
		}
		if !ok {
			return f.errorf("%s restarted as pid %d, which is not alive (state %s)", m, p.PID, st)
		}
		out = append(out, fmt.Sprintf("%s pid %d → %d", m, f.old[m], p.PID))
	}
	sort.Strings(out)
	f.evidence = "restarted: " + strings.Join(out, ", ")
	return nil
}

// Revert does nothing: a restart cannot be undone.
func (f *restartFault) Revert(context.Context, Env) error {
	f.old, f.order = nil, nil
	return nil
}
