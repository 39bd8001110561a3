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

// alive reports whether pid exists and is neither a zombie nor dead.
func alive(pid int) (bool, supervisor.State, error) {
	st, err := ProcState(pid)
	if errors.Is(err, ErrNoProcess) {
		return false, st, nil
	}
	if err != nil {
		return false, st, err
	}
	return st != supervisor.StateZombie, st, nil
}
