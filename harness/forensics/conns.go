package forensics

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Which leg has no bound: when requests hang behind a proxy, the open TCP connections
// of each supervised process (its socket fds matched with /proc/PID/net/tcp and tcp6)
// are mapped to the process listening at the other end, so the bundle reads
// "router → decode-0 at 127.0.0.1:18202: 5 connections ESTABLISHED". Why not
// prometheus/procfs: its /proc/net/tcp reader is deprecated (and it has no fd→socket
// match); the format is a dozen columns.

// Conn is one TCP socket as /proc/PID/net/tcp lists it.
type Conn struct {
	Local   string `json:"local"`  // host:port
	Remote  string `json:"remote"` // host:port; 0.0.0.0:0 for a listener
	State   string `json:"state"`  // ESTABLISHED, LISTEN, CLOSE_WAIT, ...
	TxQueue uint64 `json:"tx_queue"`
	RxQueue uint64 `json:"rx_queue"`
	Inode   uint64 `json:"inode"`
}

// tcpStates are the kernel's TCP states (include/net/tcp_states.h) by their hex code.
var tcpStates = map[string]string{"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}

// maxNetTCPLines bounds one /proc/net/tcp read (a busy host has many sockets).
const maxNetTCPLines = 1 << 20

// ParseNetTCP parses /proc/net/tcp or /proc/net/tcp6. A malformed line is an error
// naming its line number.
func ParseNetTCP(r io.Reader) ([]Conn, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	var out []Conn
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			continue // the header
		}
		if n > maxNetTCPLines {
			return out, fmt.Errorf("forensics: net/tcp: more than %d lines", maxNetTCPLines)
		}
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 10 {
			return nil, fmt.Errorf("forensics: net/tcp line %d: %d fields, want at least 10", n, len(f))
		}
		local, err1 := hexAddr(f[1])
		remote, err2 := hexAddr(f[2])
		tx, rx, ok := strings.Cut(f[4], ":")
		txq, err3 := strconv.ParseUint(tx, 16, 64)
		rxq, err4 := strconv.ParseUint(rx, 16, 64)
		inode, err5 := strconv.ParseUint(f[9], 10, 64)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil || !ok {
			return nil, fmt.Errorf("forensics: net/tcp line %d: %q: %v", n, sc.Text(), err)
		}
		st := tcpStates[strings.ToUpper(f[3])]
		if st == "" {
			st = "0x" + f[3]
		}
		out = append(out, Conn{Local: local, Remote: remote, State: st, TxQueue: txq, RxQueue: rxq, Inode: inode})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("forensics: net/tcp: %w", err)
	}
	return out, nil
}

// hexAddr decodes "0100007F:4E20" (IPv4) or a 32-digit IPv6 address and port: the
// kernel prints each 32-bit word in host byte order (little-endian here).
func hexAddr(s string) (string, error) {
	ip, port, ok := strings.Cut(s, ":")
	if !ok || (len(ip) != 8 && len(ip) != 32) || len(port) != 4 {
		return "", fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(ip)
	if err != nil {
		return "", fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 { // each word little-endian
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", fmt.Errorf("bad port %q", s)
	}
	addr := net.IP(b)
	if v4 := addr.To4(); v4 != nil {
		addr = v4
	}
	return net.JoinHostPort(addr.String(), strconv.FormatUint(p, 10)), nil
}

// socketInodes are the inodes of pid's socket fds ("socket:[12345]").
func socketInodes(procRoot string, pid int) (map[uint64]bool, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("forensics: %w", err)
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if in, ok := strings.CutPrefix(link, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(in, "]"), 10, 64); err == nil {
				out[n] = true
			}
		}
	}
	return out, nil
}

// ProcessConns lists pid's TCP sockets: its network namespace's tcp and tcp6 tables
// filtered by the sockets among its fds.
func ProcessConns(procRoot string, pid int) ([]Conn, error) {
	inodes, err := socketInodes(procRoot, pid)
	if err != nil {
		return nil, err
	}
	var out []Conn
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "net", name))
		if errors.Is(err, os.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("forensics: %w", err)
		}
		conns, err := ParseNetTCP(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		for _, c := range conns {
			if inodes[c.Inode] {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// ConnGroup is a process's connections to one peer address in one state.
type ConnGroup struct {
	Peer     string `json:"peer"` // the process listening there, or "" when not one of ours
	PeerPID  int    `json:"peer_pid,omitempty"`
	Remote   string `json:"remote"`
	State    string `json:"state"`
	Count    int    `json:"count"`
	SendQ    uint64 `json:"send_queue_bytes"`
	RecvQ    uint64 `json:"recv_queue_bytes"`
	Incoming bool   `json:"incoming,omitempty"` // the peer dialled us (our side is its listener's port)
	// IdleSeconds is how long since any of the group's connections last sent or
	// received data (the kernel's tcp_info through sock_diag); nil when unknown (a
	// process in another network namespace, or sock_diag refused).
	IdleSeconds *float64 `json:"idle_seconds,omitempty"`
}

// ConnReport is one process's TCP sockets, grouped by peer.
type ConnReport struct {
	Process   string      `json:"process"`
	PID       int         `json:"pid"`
	Listening []string    `json:"listening,omitempty"`
	Groups    []ConnGroup `json:"connections,omitempty"`
	Error     string      `json:"error,omitempty"`
}

// Connections maps the open TCP connections of each process to the process at the other
// end, among procs: the one with a listening socket on the remote address (or on the
// wildcard address and the remote port).
func Connections(procRoot string, procs []Process) []ConnReport {
	conns := make([][]Conn, len(procs))
	errs := make([]error, len(procs))
	type owner struct {
		name string
		pid  int
	}
	listeners := map[string]owner{} // host:port (and *:port for wildcards) -> listening process
	for i, p := range procs {
		conns[i], errs[i] = ProcessConns(procRoot, p.PID)
		for _, c := range conns[i] {
			if c.State != "LISTEN" {
				continue
			}
			listeners[c.Local] = owner{p.Name, p.PID}
			if host, port, err := net.SplitHostPort(c.Local); err == nil && (host == "0.0.0.0" || host == "::") {
				listeners["*:"+port] = owner{p.Name, p.PID}
			}
		}
	}
	lookup := func(addr string) (owner, bool) {
		if o, ok := listeners[addr]; ok {
			return o, true
		}
		if _, port, err := net.SplitHostPort(addr); err == nil {
			o, ok := listeners["*:"+port]
			return o, ok
		}
		return owner{}, false
	}
	idle, _ := tcpIdleByInode() // best effort: without it, no idle times
	out := make([]ConnReport, len(procs))
	for i, p := range procs {
		rep := ConnReport{Process: p.Name, PID: p.PID}
		if errs[i] != nil {
			rep.Error = errs[i].Error()
		}
		groups := map[[3]string]*ConnGroup{}
		for _, c := range conns[i] {
			if c.State == "LISTEN" {
				rep.Listening = append(rep.Listening, c.Local)
				continue
			}
			g := ConnGroup{Remote: c.Remote, State: c.State}
			if o, ok := lookup(c.Remote); ok && !(o.pid == p.PID && o.name == p.Name) {
				g.Peer, g.PeerPID = o.name, o.pid
			} else if o, ok := lookup(c.Local); ok && o.pid == p.PID {
				g.Incoming = true // an accepted connection: who dialled is in its own report
			}
			key := [3]string{g.Peer, g.Remote, g.State}
			if g.Incoming {
				key = [3]string{"<in>", c.Local, g.State}
				g.Remote = c.Local
			}
			var quiet *float64
			if ti, ok := idle[c.Inode]; ok {
				v := float64(min(ti.sentMs, ti.recvMs)) / 1000
				quiet = &v
			}
			if prev := groups[key]; prev != nil {
				prev.Count++
				prev.SendQ += c.TxQueue
				prev.RecvQ += c.RxQueue
				if quiet != nil && (prev.IdleSeconds == nil || *quiet < *prev.IdleSeconds) {
					prev.IdleSeconds = quiet // the group's most recent activity
				}
				continue
			}
			g.Count, g.SendQ, g.RecvQ, g.IdleSeconds = 1, c.TxQueue, c.RxQueue, quiet
			groups[key] = &g
		}
		for _, g := range groups {
			rep.Groups = append(rep.Groups, *g)
		}
		sort.Slice(rep.Groups, func(a, b int) bool {
			x, y := rep.Groups[a], rep.Groups[b]
			if x.Peer != y.Peer {
				return x.Peer > y.Peer // named peers first
			}
			return x.Remote+x.State < y.Remote+y.State
		})
		sort.Strings(rep.Listening)
		out[i] = rep
	}
	return out
}

// FormatConnections is the human reading of Connections, one line per group:
//
//	router (pid 12) → decode-0 (pid 14) at 127.0.0.1:18202: 5 connections ESTABLISHED, send queue 0 B, receive queue 0 B, no bytes for 8.0 s
func FormatConnections(reps []ConnReport) []byte {
	var b bytes.Buffer
	for _, r := range reps {
		fmt.Fprintf(&b, "%s (pid %d)", r.Process, r.PID)
		if r.Error != "" {
			fmt.Fprintf(&b, ": %s\n", r.Error)
			continue
		}
		if len(r.Listening) > 0 {
			fmt.Fprintf(&b, " listening on %s", strings.Join(r.Listening, ", "))
		}
		b.WriteString("\n")
		for _, g := range r.Groups {
			noun := "connection"
			if g.Count != 1 {
				noun += "s"
			}
			switch {
			case g.Incoming:
				fmt.Fprintf(&b, "  ← %d %s accepted on %s, %s", g.Count, noun, g.Remote, g.State)
			case g.Peer != "":
				fmt.Fprintf(&b, "  → %s (pid %d) at %s: %d %s %s", g.Peer, g.PeerPID, g.Remote, g.Count, noun, g.State)
			default:
				fmt.Fprintf(&b, "  → %s (not a supervised process): %d %s %s", g.Remote, g.Count, noun, g.State)
			}
			fmt.Fprintf(&b, ", send queue %d B, receive queue %d B", g.SendQ, g.RecvQ)
			if g.IdleSeconds != nil {
				fmt.Fprintf(&b, ", no bytes for %.1f s", *g.IdleSeconds)
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}
