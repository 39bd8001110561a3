package chaos

import (
	"errors"
	"fmt"

	"pdsoak/supervisor"
)

// ErrNoProcess: /proc has no such pid.
var ErrNoProcess = errors.New("chaos: no such process")

// ProcState returns the state of a process as /proc reports it, read by the supervisor
// (the one /proc/<pid>/stat reader): running (or sleeping), stopped (SIGSTOP or traced)
// or zombie. A pid that does not exist, or is dead, yields ErrNoProcess.
func ProcState(pid int) (supervisor.State, error) {
	st, err := supervisor.ReadState(pid)
	if err != nil {
		return st, fmt.Errorf("chaos: state of pid %d: %w", pid, err)
	}
	if st == supervisor.StateGone {
		return st, fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
	}
	return st, nil
}

// ProcStater is implemented by an Env whose processes are not the host's (the
// simulator's): the process faults read their states from it instead of /proc.
type ProcStater interface {
	ProcState(pid int) (supervisor.State, error)
}

// envProcState is pid's state as env knows it (ProcStater), else as /proc says.
func envProcState(env Env, pid int) (supervisor.State, error) {
	if ps, ok := env.(ProcStater); ok {
		return ps.ProcState(pid)
	}
	return ProcState(pid)
}

// alive reports whether pid exists and is neither a zombie nor dead.
func alive(env Env, pid int) (bool, supervisor.State, error) {
	st, err := envProcState(env, pid)
	if errors.Is(err, ErrNoProcess) {
		return false, st, nil
	}
	if err != nil {
		return false, st, err
	}
	return st != supervisor.StateZombie, st, nil
}
