package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/judge"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/netns"
)

// nsObservation is what a watcher saw of a namespaced topology while the run went on.
type nsObservation struct {
	mu sync.Mutex
	// netInode is each member's /proc/PID/ns/net link (net:[inode]) and cmdline.
	netInode, cmdline map[string]string
	// rx and tx are the largest byte counters seen on each member's host veth.
	rx, tx map[string]uint64
}

// watchNetns samples the namespaces named prefix-* until stop is closed: the net
// namespace of the process in each, and its veth counters (gone after teardown).
func watchNetns(prefix string, names []string, stop <-chan struct{}) *nsObservation {
	o := &nsObservation{netInode: map[string]string{}, cmdline: map[string]string{}, rx: map[string]uint64{}, tx: map[string]uint64{}}
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for i, name := range names {
				ns := prefix + "-" + name
				out, err := exec.Command("ip", "netns", "pids", ns).Output()
				if err == nil {
					for _, pid := range strings.Fields(string(out)) {
						link, lerr := os.Readlink(filepath.Join("/proc", pid, "ns", "net"))
						cmd, cerr := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
						// A process exiting at teardown (a zombie) has an empty command
						// line: it must not overwrite what the run showed.
						if lerr == nil && cerr == nil && len(cmd) > 0 {
							o.mu.Lock()
							o.netInode[name], o.cmdline[name] = link, strings.ReplaceAll(string(cmd), "\x00", " ")
							o.mu.Unlock()
						}
					}
				}
				hostIf := prefix + "h" + strconv.Itoa(i)
				for _, c := range []struct {
					file string
					dst  map[string]uint64
				}{{"rx_bytes", o.rx}, {"tx_bytes", o.tx}} {
					b, err := os.ReadFile(filepath.Join("/sys/class/net", hostIf, "statistics", c.file))
					if err != nil {
						continue
					}
					v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
					o.mu.Lock()
					c.dst[name] = max(c.dst[name], v)
					o.mu.Unlock()
				}
			}
		}
	}()
	return o
}

// netnsPrefix is a prefix of its own for each test run, so parallel packages never
// share namespaces.
func netnsPrefix(t *testing.T) string {
	b := make([]byte, 3)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "pdt" + hex.EncodeToString(b)
}

// The smoke, partition and decode-crash scenarios, shortened, with router, prefill and decode each in
// its own network namespace (reference.netns): HTTP and KV transfer cross veth pairs
// and a bridge, the partition's fault proxies sit on the bridge address, and the
// namespaces are gone afterwards.
func TestNetnsScenarios(t *testing.T) {
	if err := netns.Supported(); err != nil {
		t.Skipf("network namespaces unavailable here (%v): the --netns topology needs root and a kernel that allows `ip netns add`", err)
	}
	bin := pdserverBinary(t)
	names := netns.TopologyNames(1, 1)
	tests := []struct {
		name    string
		shorten func(sc *scenarios.Scenario)
	}{
		{"smoke", func(sc *scenarios.Scenario) {
			sc.Duration = scenarios.Duration(8 * time.Second)
			w := &sc.Workloads[0]
			w.Agents, w.Turns = 6, 3
			w.ThinkTime = scenarios.Duration(500 * time.Millisecond)
			w.ToolLatency = scenarios.Duration(100 * time.Millisecond)
		}},
		{"partition", func(sc *scenarios.Scenario) {
			sc.Duration = scenarios.Duration(26 * time.Second)
			sc.Workloads[0].Agents, sc.Workloads[0].Turns = 4, 6
			sc.Workloads[0].ThinkTime = scenarios.Duration(time.Second)
			sc.Faults[0].At, sc.Faults[0].For = scenarios.Duration(4*time.Second), scenarios.Duration(4*time.Second)
			sc.Faults[1].At, sc.Faults[1].For = scenarios.Duration(14*time.Second), scenarios.Duration(4*time.Second)
		}},
		// process faults go through `ip netns exec`, which execs: the kill reaches
		// pdserver itself and the restart lands in the same namespace.
		{"decode-crash", func(sc *scenarios.Scenario) {
			sc.Duration = scenarios.Duration(25 * time.Second)
			sc.Faults[0].At = scenarios.Duration(6 * time.Second)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := netnsPrefix(t)
			t.Cleanup(func() { _ = netns.Cleanup(context.Background(), prefix) })
			sc, err := scenarios.Load(filepath.Join("..", "scenarios", tc.name+".yaml"), scenarios.WithOverrides(func(sc *scenarios.Scenario) {
				tc.shorten(sc)
				sc.Reference.Netns, sc.Reference.NetnsPrefix = true, prefix
			}))
			require.NoError(t, err)
			dir := t.TempDir()
			stop := make(chan struct{})
			obs := watchNetns(prefix, names, stop)
			runErr := Run(context.Background(), sc, Options{OutDir: dir, PDServerCommand: []string{bin}})
			close(stop)
			require.NoError(t, runErr)

			res, err := reports.ComputeFile(filepath.Join(dir, ledger.EventsFile), judge.ReportConfig(sc))
			require.NoError(t, err)
			assert.Equal(t, reports.VerdictPass, res.Verdict, "failed: %v", res.Failed())
			outcomes := checkOneTerminal(t, readLedger(t, dir))
			assert.Positive(t, outcomes[ledger.OutcomeOK], "outcomes %v", outcomes)

			obs.mu.Lock()
			defer obs.mu.Unlock()
			t.Logf("namespaces %v; veth bytes sent %v, received %v", obs.netInode, obs.rx, obs.tx)
			self, err := os.Readlink("/proc/self/ns/net")
			require.NoError(t, err)
			seen := map[string]string{}
			for _, name := range names {
				inode := obs.netInode[name]
				require.NotEmpty(t, inode, "no process seen in namespace %s-%s", prefix, name)
				assert.NotEqual(t, self, inode, "%s runs in the test's own network namespace", name)
				assert.Contains(t, obs.cmdline[name], "pdserver "+strings.SplitN(name, "-", 2)[0],
					"the process in %s's namespace is pdserver itself (ip netns exec execs)", name)
				if other, dup := seen[inode]; dup {
					t.Errorf("%s and %s share network namespace %s", name, other, inode)
				}
				seen[inode] = name
				// Every member sends and receives real bytes over its veth: requests,
				// tokens and KV pages do not fit in ARP alone.
				assert.Greater(t, obs.rx[name], uint64(20_000), "bytes %s sent over its veth", name)
				assert.Greater(t, obs.tx[name], uint64(20_000), "bytes %s received over its veth", name)
			}
			left, err := netns.Namespaces(context.Background(), prefix)
			require.NoError(t, err)
			assert.Empty(t, left, "namespaces left behind")
			_, err = os.Stat(filepath.Join("/sys/class/net", prefix+"br"))
			assert.True(t, os.IsNotExist(err), "bridge %sbr left behind", prefix)
		})
	}
}
