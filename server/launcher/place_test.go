package launcher

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A placed process runs behind its Wrap prefix (here env, which execs like ip netns
// exec), binds its Placement.Host and is reached there; the router's port stays
// Config.Port. The supervised pid is the command itself, not the wrapper.
func TestPlacementWrapsAndBinds(t *testing.T) {
	routerPort := freeTestPort(t)
	topo := start(t, Config{Prefill: 1, Decode: 1, Port: routerPort,
		Place: func(name string) (Placement, bool) {
			if name != RoleRouter {
				return Placement{}, false
			}
			return Placement{Host: "127.0.0.1", Wrap: []string{"env", "PDSOAK_PLACED=router"}}, true
		}})
	r, err := topo.Process(RoleRouter)
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:"+itoa(routerPort), r.URL)
	args := argsOf(t, r.URL)
	assert.Contains(t, strings.Join(args, " "), "--host 127.0.0.1 --port "+itoa(routerPort))
	cmdline, err := os.ReadFile(filepath.Join("/proc", itoa(r.PID), "cmdline"))
	require.NoError(t, err)
	assert.Equal(t, fakepd, strings.SplitN(string(cmdline), "\x00", 2)[0], "env exec'd the command: the pid is fakepd's")
	environ, err := os.ReadFile(filepath.Join("/proc", itoa(r.PID), "environ"))
	require.NoError(t, err)
	assert.Contains(t, string(environ), "PDSOAK_PLACED=router", "the wrapper ran")
	d, err := topo.Process("decode-0")
	require.NoError(t, err)
	environ, err = os.ReadFile(filepath.Join("/proc", itoa(d.PID), "environ"))
	require.NoError(t, err)
	assert.NotContains(t, string(environ), "PDSOAK_PLACED", "an unplaced process is not wrapped")
}

func freeTestPort(t *testing.T) int {
	t.Helper()
	p, err := freePort("127.0.0.1")
	require.NoError(t, err)
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
