package launcher

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChildProcs(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		cpus, processes, want int
	}{
		{"two CPUs, three processes", 2, 3, 1},
		{"sixteen CPUs, three processes", 16, 3, 5},
		{"more processes than CPUs", 2, 9, 1},
		{"one process", 4, 1, 4},
		{"no processes counted", 4, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ChildProcs(tc.cpus, tc.processes))
		})
	}
}

// environGoMaxProcs is the GOMAXPROCS entry of pid's environment ("" when unset).
func environGoMaxProcs(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	var got string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(GoMaxProcsEnv+"=")); ok {
			got = string(v) // the last one is what the runtime reads
		}
	}
	return got
}

// Every child gets its share of the CPUs as GOMAXPROCS unless the caller chose one
// (Config.GoMaxProcs, Config.Env or the launcher's own environment) or asked for none.
func TestChildGoMaxProcs(t *testing.T) {
	t.Setenv(GoMaxProcsEnv, "") // restored at the end; unset for the cases
	require.NoError(t, os.Unsetenv(GoMaxProcsEnv))
	share := fmt.Sprint(ChildProcs(runtime.GOMAXPROCS(0), 3))
	for _, tc := range []struct {
		name   string
		cfg    Config
		parent string // the launcher's own GOMAXPROCS ("" unset)
		want   string
	}{
		{"default: the share", Config{}, "", share},
		{"explicit", Config{GoMaxProcs: 3}, "", "3"},
		{"negative: unset", Config{GoMaxProcs: -1}, "", ""},
		{"Env wins", Config{GoMaxProcs: 3, Env: []string{"GOMAXPROCS=7"}}, "", "7"},
		{"the launcher's environment wins", Config{}, "6", "6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.parent != "" {
				t.Setenv(GoMaxProcsEnv, tc.parent)
			}
			tc.cfg.Prefill, tc.cfg.Decode = 1, 1
			topo := start(t, tc.cfg)
			for _, p := range topo.Processes() {
				assert.Equal(t, tc.want, environGoMaxProcs(t, p.PID), p.Name)
			}
		})
	}
}
