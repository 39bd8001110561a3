package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// ErrNoProcess: /proc has no such pid.
var ErrNoProcess = errors.New("chaos: no such process")

// procRoot is /proc; tests may point it elsewhere.
var procRoot = "/proc"

// ProcState returns the state letter of a process from /proc/<pid>/stat: R running,
// S sleeping, D disk sleep, T stopped (SIGSTOP), t tracing stop, Z zombie, X dead.
// A pid that does not exist yields ErrNoProcess.
func ProcState(pid int) (byte, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("chaos: bad pid %d", pid)
	}
	data, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
		}
		return 0, fmt.Errorf("chaos: read /proc/%d/stat: %w", pid, err)
	}
	return parseStat(data)
}

// parseStat extracts the state from a stat line "pid (comm) S ...". comm may contain
// spaces and parentheses, so the state follows the last ')'.
func parseStat(data []byte) (byte, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) || data[i+1] != ' ' {
		return 0, fmt.Errorf("chaos: malformed /proc stat %q", truncate(data, 64))
	}
	return data[i+2], nil
}

// alive reports whether pid exists and is neither a zombie nor dead.
func alive(pid int) (bool, byte, error) {
	st, err := ProcState(pid)
	if errors.Is(err, ErrNoProcess) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return st != 'Z' && st != 'X' && st != 'x', st, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
