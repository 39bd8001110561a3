package target

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// TestLaunchedLinksMetricsAndTeardown launches a process behind a declared link proxy
// (target.url names the proxy), checks the per-process metrics and debug sources, faults
// the link, and checks the teardown.
func TestLaunchedLinksMetricsAndTeardown(t *testing.T) {
	port := freePort(t)
	spec := scenarios.Launch{Name: "server", Role: "colocated", Launcher: fakepd + " colocated",
		Command: []string{"--port"}, ExtraArgs: strconv.Itoa(port),
		HealthURL:    fmt.Sprintf("http://127.0.0.1:%d/health", port),
		MetricsURL:   fmt.Sprintf("http://127.0.0.1:%d/metrics", port),
		StartTimeout: scenarios.Duration(20 * time.Second)}
	tgt := scenarios.Target{
		URL:         "http://{link:client->server}",
		MetricsURLs: map[string]string{"router": "http://127.0.0.1:1/metrics", "decode-0": "http://127.0.0.1:2/metrics"},
		Links:       []scenarios.ProxyLink{{Name: "client->server", Upstream: fmt.Sprintf("127.0.0.1:%d", port)}},
		Launch:      []scenarios.Launch{spec},
	}
	probe := func(ctx context.Context, url string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	l, err := StartLaunched(context.Background(), tgt, t.TempDir(), WithDebugProbe(probe))
	require.NoError(t, err)
	defer l.Stop(context.Background())

	link, err := l.Link("client->server")
	require.NoError(t, err)
	assert.Equal(t, "http://"+link.Addr(), l.URL(), "load goes through the proxy")
	assert.Equal(t, []string{fakepd, "colocated", "--port", strconv.Itoa(port)}, l.Commands()["server"])
	assert.Equal(t, []Source{
		{Process: "decode-0", URL: "http://127.0.0.1:2/metrics"},
		{Process: "router", URL: "http://127.0.0.1:1/metrics"},
		{Process: "server", URL: spec.MetricsURL},
	}, l.MetricsSources())
	assert.Equal(t, []Source{{Process: "server", URL: fmt.Sprintf("http://127.0.0.1:%d/debug/requests", port)}}, l.DebugSources())

	get := func() error {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(l.URL() + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	require.NoError(t, get())
	require.NoError(t, link.Down())
	assert.Error(t, get(), "a partitioned link refuses")
	require.NoError(t, link.Up())
	require.NoError(t, get())

	p, err := l.Process("server")
	require.NoError(t, err)
	require.NoError(t, l.Restart(context.Background(), "server"))
	require.NoError(t, l.Stop(context.Background()), "the teardown check passes: both process groups are gone")
	for _, pid := range []int{p.PID} {
		assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH)
	}
}

// TestCheckGroupsGoneNamesLeftovers leaves an unreaped process (a zombie still in its
// process group): the check must fail naming it, and pass once it is reaped.
func TestCheckGroupsGoneNamesLeftovers(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	err := checkGroupsGone(context.Background(), map[int]string{pid: "straggler"}, 500*time.Millisecond)
	require.ErrorIs(t, err, ErrLeftBehind)
	assert.ErrorContains(t, err, fmt.Sprintf("straggler (process group %d: pid %d", pid, pid))
	_ = cmd.Wait()
	require.NoError(t, checkGroupsGone(context.Background(), map[int]string{pid: "straggler"}, 10*time.Second))
}

func TestLaunchedLinkErrors(t *testing.T) {
	port := freePort(t)
	spec := launchSpec("server", port)
	spec.Command = append(spec.Command, "--x={link:nope}")
	_, err := StartLaunched(context.Background(), scenarios.Target{URL: "http://127.0.0.1:1", Launch: []scenarios.Launch{spec}}, t.TempDir())
	require.ErrorContains(t, err, "{link:nope}: target.links is empty")
}

// Processes that ignore SIGTERM use up the caller's bound in Stop (each has the stop
// timeout before SIGKILL), and the ones SIGKILLed as it runs out are still dying when
// the teardown is checked. The check must give them its own bound rather than call
// them left behind at once (ErrLeftBehind makes the run invalid).
func TestStopOutOfTimeWaitsForTheKilled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	spec := scenarios.Launch{Name: "stubborn", Role: "colocated", Command: []string{"sh", "-c", `trap "" TERM; sleep 300`}}
	l, err := StartLaunched(context.Background(), scenarios.Target{URL: "http://" + ln.Addr().String(), Launch: []scenarios.Launch{spec}},
		t.TempDir(), WithStopTimeout(time.Minute, 0))
	require.NoError(t, err)
	p, err := l.Process("stubborn")
	require.NoError(t, err)
	// A member of its process group that dies as the group is signalled but is reaped
	// (by this test, its parent) only a moment after its leader: a worker still exiting.
	member := exec.Command("sleep", "300")
	member.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: p.PID}
	require.NoError(t, member.Start())
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if errors.Is(syscall.Kill(p.PID, 0), syscall.ESRCH) {
				break // the leader is gone: Stop is at its teardown check
			}
		}
		time.Sleep(200 * time.Millisecond)
		_ = member.Wait()
	}()
	// The caller's bound runs out long before the stop timeout: SIGKILL then.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = l.Stop(ctx)
	<-reaped
	require.NoError(t, err)
	assert.ErrorIs(t, syscall.Kill(-p.PID, 0), syscall.ESRCH)
}
