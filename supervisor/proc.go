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

// NotReapedWhy says why pid, sent SIGKILL, has not been reaped, from /proc: stuck in a
// kernel call (state D: a GPU driver or a hung filesystem; it ends when the call returns),
// or held by a tracer (a debugger or profiler attached to it: its exit goes to the tracer
// first, and its parent cannot reap it until the tracer collects it or detaches).
func NotReapedWhy(pid int) string {
	stat, err := os.ReadFile(ProcRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "its /proc entry is unreadable: " + err.Error()
	}
	letter, err := ParseStat(stat)
	if err != nil {
		return err.Error()
	}
	status, _ := os.ReadFile(ProcRoot + "/" + strconv.Itoa(pid) + "/status")
	tracer := ParseTracerPid(status)
	switch {
	case letter == 'D':
		return "in uninterruptible sleep (state D): stuck in a kernel call, such as a GPU driver's or a hung filesystem's; it ends only when that call returns"
	case tracer > 0:
		return fmt.Sprintf("traced by pid %d (state %c): a debugger or profiler is attached, and the exit is reported to it first; detach it", tracer, letter)
	default:
		return fmt.Sprintf("state %c", letter)
	}
}

// ParseTracerPid returns the TracerPid field of a /proc/<pid>/status file (0: none, or
// not found).
func ParseTracerPid(status []byte) int {
	for line := range bytes.Lines(status) {
		if v, ok := bytes.CutPrefix(line, []byte("TracerPid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 {
				return 0
			}
			return n
		}
	}
	return 0
}
