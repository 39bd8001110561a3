package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/netns"
)

func TestUpNetnsBadPrefix(t *testing.T) {
	code, _, stderr := run(t, "up", "--netns", "--netns-prefix", "1bad")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--netns-prefix")
	assertUserFacing(t, stderr)
}

// `pdserver up --netns` serves a completion through a router in its own namespace, and
// SIGTERM removes every namespace and link it made.
func TestUpNetnsServesAndTearsDown(t *testing.T) {
	if err := netns.Supported(); err != nil {
		t.Skipf("network namespaces unavailable here (%v): `up --netns` needs root and `ip netns add`", err)
	}
	if testing.Short() {
		t.Skip("real pdserver processes: not in -short")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "pdserver")
	out, err := exec.Command("go", "build", "-o", exe, "pdsoak/cmd/pdserver").CombinedOutput()
	require.NoError(t, err, "%s", out)
	b := make([]byte, 3)
	_, err = rand.Read(b)
	require.NoError(t, err)
	prefix := "pdc" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = netns.Cleanup(context.Background(), prefix) })

	cmd := exec.Command(exe, "up", "--netns", "--netns-prefix", prefix, "--port", "0", "--log-dir", filepath.Join(dir, "logs"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	routerURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "router: "); ok {
				routerURL <- u
			}
		}
		exited <- cmd.Wait()
	}()
	var url string
	select {
	case url = <-routerURL:
	case err := <-exited:
		t.Fatalf("pdserver up exited before the router was up: %v; logs in %s", err, dir)
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no router URL within 90s")
	}
	assert.Contains(t, url, "http://10.201.", "the router listens on its namespace's bridge address")
	nss, err := netns.Namespaces(context.Background(), prefix)
	require.NoError(t, err)
	assert.Len(t, nss, 3, "router, prefill-0 and decode-0")

	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"ref","prompt":"across namespaces","max_tokens":8}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"text"`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "pdserver up exits 0 on SIGTERM")
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pdserver up did not stop within 60s of SIGTERM")
	}
	nss, err = netns.Namespaces(context.Background(), prefix)
	require.NoError(t, err)
	assert.Empty(t, nss, "namespaces left behind")
	_, err = os.Stat(filepath.Join("/sys/class/net", prefix+"br"))
	assert.True(t, os.IsNotExist(err), "bridge left behind")
}
