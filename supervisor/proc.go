package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// State is a process's state as /proc reports it.
type State string

// States of a process.
const (
	StateRunning State = "running" // R, S, D, I, W: running or sleeping
	StateStopped State = "stopped" // T, t: SIGSTOP or traced
	StateZombie  State = "zombie"  // Z: exited, not reaped yet
	StateGone    State = "gone"    // no such pid (or X: dead)
)

// ProcRoot is where the proc filesystem is mounted.
const ProcRoot = "/proc"

// ReadState returns the state of pid from /proc/<pid>/stat.
func ReadState(pid int) (State, error) {
	if pid <= 0 {
		return StateGone, fmt.Errorf("supervisor: bad pid %d", pid)
	}
	data, err := os.ReadFile(ProcRoot + "/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return StateGone, nil
	}
	if err != nil {
		return StateGone, fmt.Errorf("supervisor: %w", err)
	}
	letter, err := ParseStat(data)
	if err != nil {
		return StateGone, err
	}
	return stateOf(letter), nil
}

// ParseStat returns the state letter of a /proc/<pid>/stat line "pid (comm) S ...".
// comm may hold spaces and parentheses, so the state is the byte after the last ") ".
func ParseStat(data []byte) (byte, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) || data[i+1] != ' ' {
		if len(data) > 64 {
			data = data[:64]
		}
		return 0, fmt.Errorf("supervisor: malformed /proc stat %q", data)
	}
	return data[i+2], nil
}

func stateOf(letter byte) State {
	switch letter {
	case 'T', 't':
		return StateStopped
	case 'Z':
		return StateZombie
	case 'X', 'x':
		return StateGone
	default:
		return StateRunning
	}
}
