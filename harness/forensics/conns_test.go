package forensics

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const helperEnv = "PDSOAK_FORENSICS_HELPER"

// TestHelperHungPeer is not a test: run by TestConnectionsMapHungLegToPeer as a child
// process, it is either a server that accepts and never answers, or a client that
// connects to it, sends a request and waits for an answer that never comes. Both stop
// on their own after a minute (a hang guard).
func TestHelperHungPeer(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	guard := time.After(time.Minute)
	switch role {
	case "server":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(2)
		}
		fmt.Println(ln.Addr().String())
		var held []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				held = append(held, c) // read nothing, answer nothing
			}
		}()
	case "client":
		c, err := net.Dial("tcp", os.Getenv(helperEnv+"_ADDR"))
		if err != nil {
			os.Exit(2)
		}
		fmt.Fprintf(c, "POST /generate HTTP/1.1\r\nHost: decode\r\nContent-Length: 2\r\n\r\n{}")
		fmt.Println("sent")
		go func() { _, _ = c.Read(make([]byte, 1)) }() // the answer that never comes
	}
	<-guard
	os.Exit(0)
}

// startHelper starts this test binary as a helper child and returns it with its first
// line of output.
func startHelper(t *testing.T, role string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHungPeer$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "%s helper said nothing", role)
	return cmd, strings.TrimSpace(line)
}

// A real hung TCP connection between two processes on loopback: the bundle maps the
// client's (router's) connection to the server (decode) process and its port.
func TestConnectionsMapHungLegToPeer(t *testing.T) {
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		t.Skip("no /proc/self/net/tcp on this system:", err)
	}
	srv, addr := startHelper(t, "server")
	cli, said := startHelper(t, "client", helperEnv+"_ADDR="+addr)
	require.Equal(t, "sent", said)

	procs := []Process{{Name: "router", PID: cli.Process.Pid}, {Name: "decode", PID: srv.Process.Pid}}
	reps := Connections("/proc", procs)
	require.Len(t, reps, 2)
	router, decode := reps[0], reps[1]
	require.Empty(t, router.Error)
	require.Len(t, router.Groups, 1, "%+v", router.Groups)
	g := router.Groups[0]
	assert.Equal(t, "decode", g.Peer)
	assert.Equal(t, srv.Process.Pid, g.PeerPID)
	assert.Equal(t, addr, g.Remote)
	assert.Equal(t, "ESTABLISHED", g.State)
	assert.Equal(t, 1, g.Count)
	assert.Equal(t, []string{addr}, decode.Listening)
	// The server holds the request unread: the kernel's receive queue says so.
	require.Len(t, decode.Groups, 1, "%+v", decode.Groups)
	assert.True(t, decode.Groups[0].Incoming)
	assert.Positive(t, decode.Groups[0].RecvQ, "the request sits unread in decode's receive queue")
	// How long the hung leg has been silent comes from the kernel (sock_diag), where it
	// lets us ask; its value is a duration, not asserted.
	if _, err := tcpIdleByInode(); err == nil {
		require.NotNil(t, g.IdleSeconds, "tcp_info of the router's connection")
		assert.GreaterOrEqual(t, *g.IdleSeconds, 0.0)
	} else {
		t.Logf("no idle times here: %v", err)
	}

	// The same in a bundle's connections.txt.
	dir := filepath.Join(t.TempDir(), "wedged")
	m, err := Write(context.Background(), dir, "wedged", "test", Sources{Processes: procs}, Config{GPU: noGPU})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "connections.txt"))
	require.NoError(t, err)
	want := fmt.Sprintf("router (pid %d)\n  → decode (pid %d) at %s: 1 connection ESTABLISHED", cli.Process.Pid, srv.Process.Pid, addr)
	assert.Contains(t, string(b), want)
	if g.IdleSeconds != nil {
		assert.Contains(t, string(b), "no bytes for ")
	}
	assert.Contains(t, string(b), fmt.Sprintf("harness (pid %d)", os.Getpid()), "the harness itself is mapped too")
	for _, it := range m.Items {
		if it.Collector == "connections" {
			assert.Empty(t, it.Error)
		}
	}
}

func TestParseNetTCP(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C350 0100007F:4E20 01 00000010:00000002 00:00000000 00000000  1000        0 222 1 0000000000000000 20 4 30 10 -1
`
	cs, err := ParseNetTCP(strings.NewReader(tcp))
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, Conn{Local: "127.0.0.1:20000", Remote: "0.0.0.0:0", State: "LISTEN", Inode: 111}, cs[0])
	assert.Equal(t, Conn{Local: "127.0.0.1:50000", Remote: "127.0.0.1:20000", State: "ESTABLISHED", TxQueue: 16, RxQueue: 2, Inode: 222}, cs[1])

	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 333 1 0 100 0 0 10 0
`
	cs, err = ParseNetTCP(strings.NewReader(tcp6))
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, "[::1]:8080", cs[0].Local)

	_, err = ParseNetTCP(strings.NewReader("header\n 0: zz:1 00000000:0000 0A 0:0 0 0 0 0 1\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
}

func FuzzParseNetTCP(f *testing.F) {
	f.Add("h\n 0: 0100007F:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000 1000 0 111 1\n")
	f.Add("h\n 0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 01 1:2 0 0 0 0 9\n")
	f.Add("h\n\n 1: a:b c:d e f g h i j\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseNetTCP(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, c := range cs {
			_, _, err := net.SplitHostPort(c.Local)
			require.NoError(t, err, c.Local)
			_, _, err = net.SplitHostPort(c.Remote)
			require.NoError(t, err, c.Remote)
			require.NotEmpty(t, c.State)
		}
	})
}
