package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"pdsoak/server/launcher"
)

// MaxPrefix is the longest prefix: interface names are at most 15 bytes and get up to
// 4 more (h123, br).
const MaxPrefix = 10

// SubnetBase is the private /16 a Net's /24 is picked from.
const SubnetBase = "10.201"

// Member is one namespace of a Net.
type Member struct {
	// Name is the caller's name for it (router, prefill-0, ...).
	Name string
	// Namespace is the network namespace (<prefix>-<name>).
	Namespace string
	// HostIf is the veth end on the bridge, in the caller's namespace; the namespace's end
	// is eth0.
	HostIf string
	// Addr is the namespace's address on the bridge.
	Addr string
}

// Net is a bridge with one namespace per member.
type Net struct {
	// Prefix names everything Create made.
	Prefix string
	// Bridge is the bridge's name; Gateway its address (the caller's namespace on it).
	Bridge, Gateway string
	// Subnet is the /24 of the bridge.
	Subnet *net.IPNet

	mu      sync.Mutex
	members map[string]*Member
	closed  bool
}

// Supported reports why namespaces cannot be made here (nil when they can): not root,
// no `ip`, or a kernel that refuses a namespace.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: needs root (network namespaces and veth pairs)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: iproute2's ip not found: %w", err)
	}
	name := fmt.Sprintf("pdsoak-probe-%d", os.Getpid())
	if err := ip(context.Background(), "netns", "add", name); err != nil {
		return fmt.Errorf("netns: the kernel refuses a network namespace: %w", err)
	}
	return ip(context.Background(), "netns", "del", name)
}

// ValidPrefix checks a prefix: 1 to MaxPrefix letters, digits or '-', starting with a
// letter.
func ValidPrefix(prefix string) error {
	if prefix == "" || len(prefix) > MaxPrefix {
		return fmt.Errorf("netns: prefix %q: want 1 to %d characters", prefix, MaxPrefix)
	}
	for i, c := range prefix {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (i > 0 && (c >= '0' && c <= '9' || c == '-'))
		if !ok {
			return fmt.Errorf("netns: prefix %q: letters, digits and '-' only, starting with a letter", prefix)
		}
	}
	return nil
}

// Create removes leftovers of prefix (Cleanup), then makes a bridge <prefix>br with an
// address in a free 10.201.N.0/24 (one that no route here overlaps), and for each name
// a namespace <prefix>-<name> whose eth0 is a veth to the bridge with its own address.
// On failure everything made is removed.
func Create(ctx context.Context, prefix string, names []string) (*Net, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if err := Cleanup(ctx, prefix); err != nil {
		return nil, err
	}
	subnet, err := freeSubnet(ctx)
	if err != nil {
		return nil, err
	}
	n := &Net{Prefix: prefix, Bridge: prefix + "br", Subnet: subnet, members: map[string]*Member{}}
	n.Gateway = hostAddr(subnet, 1)
	if err := n.create(ctx, names); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Net) create(ctx context.Context, names []string) error {
	ones, _ := n.Subnet.Mask.Size()
	steps := [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"addr", "add", n.Gateway + "/" + strconv.Itoa(ones), "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	if len(names) > 250 {
		return fmt.Errorf("netns: %d members: at most 250 fit a /24", len(names))
	}
	for i, name := range names {
		m := &Member{Name: name, Namespace: n.Prefix + "-" + name, HostIf: fmt.Sprintf("%sh%d", n.Prefix, i),
			Addr: hostAddr(n.Subnet, i+2)}
		if _, dup := n.members[name]; dup {
			return fmt.Errorf("netns: member %q twice", name)
		}
		n.mu.Lock()
		n.members[name] = m
		n.mu.Unlock()
		peer := fmt.Sprintf("%sn%d", n.Prefix, i)
		steps := [][]string{
			{"netns", "add", m.Namespace},
			{"link", "add", m.HostIf, "type", "veth", "peer", "name", peer},
			{"link", "set", m.HostIf, "master", n.Bridge},
			{"link", "set", m.HostIf, "up"},
			{"link", "set", peer, "netns", m.Namespace},
			{"-n", m.Namespace, "link", "set", peer, "name", "eth0"},
			{"-n", m.Namespace, "addr", "add", m.Addr + "/" + strconv.Itoa(ones), "dev", "eth0"},
			{"-n", m.Namespace, "link", "set", "eth0", "up"},
			{"-n", m.Namespace, "link", "set", "lo", "up"},
		}
		for _, s := range steps {
			if err := ip(ctx, s...); err != nil {
				return fmt.Errorf("netns: member %s: %w", name, err)
			}
		}
	}
	return nil
}

// Member returns the named member.
func (n *Net) Member(name string) (Member, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.members[name]
	if m == nil {
		return Member{}, fmt.Errorf("netns: no member %q", name)
	}
	return *m, nil
}

// Members returns every member.
func (n *Net) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Member, 0, len(n.members))
	for _, m := range n.members {
		out = append(out, *m)
	}
	return out
}

// Wrap is the argv prefix that runs a command in the member's namespace. `ip netns exec`
// execs the command (it does not fork), so the process started is the command itself:
// signals, process groups and the parent-death signal reach it.
func (m Member) Wrap() []string { return []string{ipPath(), "netns", "exec", m.Namespace} }

// Down takes the member's veth down on the bridge side: the member is cut off from every
// other member and from the caller (a partition, at the link layer).
func (n *Net) Down(ctx context.Context, name string) error { return n.setLink(ctx, name, "down") }

// Up brings the member's veth back.
func (n *Net) Up(ctx context.Context, name string) error { return n.setLink(ctx, name, "up") }

func (n *Net) setLink(ctx context.Context, name, state string) error {
	m, err := n.Member(name)
	if err != nil {
		return err
	}
	return ip(ctx, "link", "set", m.HostIf, state)
}

// Bandwidth limits what the bridge sends to the member (tc tbf on its host veth) to
// bytesPerSec; 0 removes the limit.
func (n *Net) Bandwidth(ctx context.Context, name string, bytesPerSec int) error {
	m, err := n.Member(name)
	if err != nil {
		return err
	}
	if bytesPerSec <= 0 {
		return tc(ctx, "qdisc", "del", "dev", m.HostIf, "root")
	}
	return tc(ctx, "qdisc", "replace", "dev", m.HostIf, "root", "tbf",
		"rate", strconv.Itoa(bytesPerSec*8)+"bit", "burst", "32kb", "latency", "400ms")
}

// Netem applies a netem qdisc (e.g. "delay", "100ms", "loss", "5%") to what the bridge
// sends to the member; the kernel must have netem (HasNetem). No arguments removes it.
func (n *Net) Netem(ctx context.Context, name string, args ...string) error {
	m, err := n.Member(name)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return tc(ctx, "qdisc", "del", "dev", m.HostIf, "root")
	}
	return tc(ctx, append([]string{"qdisc", "replace", "dev", m.HostIf, "root", "netem"}, args...)...)
}

// Counters are a member's veth byte counters, as seen on the bridge side (Rx: what the
// member sent, Tx: what it received).
type Counters struct{ Rx, Tx uint64 }

// Counters reads the member's host veth statistics from /sys.
func (n *Net) Counters(name string) (Counters, error) {
	m, err := n.Member(name)
	if err != nil {
		return Counters{}, err
	}
	var c Counters
	for _, f := range []struct {
		file string
		dst  *uint64
	}{{"rx_bytes", &c.Rx}, {"tx_bytes", &c.Tx}} {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", m.HostIf, "statistics", f.file))
		if err != nil {
			return Counters{}, fmt.Errorf("netns: %w", err)
		}
		if *f.dst, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return Counters{}, fmt.Errorf("netns: %s %s: %w", m.HostIf, f.file, err)
		}
	}
	return c, nil
}

// Close removes every namespace and link of the Net (deleting a namespace deletes its
// veth pair). Safe to call twice.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Cleanup(ctx, n.Prefix)
}

// Cleanup removes every namespace named <prefix>-* and every link named <prefix>h*,
// <prefix>n* or <prefix>br: what a run with this prefix made, crashed or not.
func Cleanup(ctx context.Context, prefix string) error {
	if err := ValidPrefix(prefix); err != nil {
		return err
	}
	nss, err := Namespaces(ctx, prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range nss {
		if err := ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	out, err := ipOut(ctx, "-o", "link", "show")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, name := range linkNames(out) {
		if name == prefix+"br" || ownLink(prefix, name) {
			// Deleting a namespace deletes its veth pair, possibly after the listing.
			if err := ip(ctx, "link", "del", name); err != nil && linkExists(name) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ownLink reports whether a link name is <prefix>h<N> or <prefix>n<N>.
func ownLink(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) < 2 || (rest[0] != 'h' && rest[0] != 'n') {
		return false
	}
	_, err := strconv.Atoi(rest[1:])
	return err == nil
}

// Namespaces lists the namespaces named <prefix>-*.
func Namespaces(ctx context.Context, prefix string) ([]string, error) {
	out, err := ipOut(ctx, "netns", "list")
	if err != nil {
		return nil, err
	}
	var nss []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], prefix+"-") {
			nss = append(nss, f[0])
		}
	}
	return nss, nil
}

// linkNames parses `ip -o link show`: "N: name[@peer]: <...> ...".
func linkNames(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, ": ", 3)
		if len(f) < 3 {
			continue
		}
		name, _, _ := strings.Cut(f[1], "@")
		names = append(names, name)
	}
	return names
}

// HasNetem reports whether the kernel has the netem qdisc (probed on a throwaway
// namespace's loopback).
func HasNetem(ctx context.Context) bool {
	name := fmt.Sprintf("pdsoak-netem-%d", os.Getpid())
	if ip(ctx, "netns", "add", name) != nil {
		return false
	}
	defer func() { _ = ip(context.WithoutCancel(ctx), "netns", "del", name) }()
	return run(ctx, ipPath(), "-n", name, "link", "set", "lo", "up") == nil &&
		run(ctx, "tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms") == nil
}

// freeSubnet picks the first 10.201.N.0/24 that no route here overlaps.
func freeSubnet(ctx context.Context) (*net.IPNet, error) {
	out, err := ipOut(ctx, "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	if n := pickSubnet(routeNets(out)); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("netns: every %s.N.0/24 overlaps a route", SubnetBase)
}

// pickSubnet is the first 10.201.N.0/24 that overlaps none of used (nil: none).
func pickSubnet(used []*net.IPNet) *net.IPNet {
	for i := 0; i < 256; i++ {
		_, cand, _ := net.ParseCIDR(fmt.Sprintf("%s.%d.0/24", SubnetBase, i))
		free := true
		for _, u := range used {
			if u.Contains(cand.IP) || cand.Contains(u.IP) {
				free = false
				break
			}
		}
		if free {
			return cand
		}
	}
	return nil
}

// routeNets parses the destinations of `ip -4 route show`: CIDRs, bare addresses
// (a /32), "local ADDR", "broadcast ADDR"; "default" overlaps nothing of interest.
func routeNets(out string) []*net.IPNet {
	var nets []*net.IPNet
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		switch dst {
		case "local", "broadcast", "unreachable", "blackhole", "prohibit", "throw", "multicast", "anycast", "unicast":
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, n, err := net.ParseCIDR(dst); err == nil {
			nets = append(nets, n)
		}
	}
	return nets
}

func hostAddr(subnet *net.IPNet, host int) string {
	ip := subnet.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], byte(host)).String()
}

func ipPath() string {
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	return "ip"
}

func ip(ctx context.Context, args ...string) error { return run(ctx, ipPath(), args...) }

func tc(ctx context.Context, args ...string) error { return run(ctx, "tc", args...) }

func ipOut(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ipPath(), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: %s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// TopologyNames are the member names of a launcher topology with p prefill and d decode
// workers: prefill-I, decode-J and router.
func TopologyNames(p, d int) []string {
	var names []string
	for i := 0; i < p; i++ {
		names = append(names, fmt.Sprintf("prefill-%d", i))
	}
	for j := 0; j < d; j++ {
		names = append(names, fmt.Sprintf("decode-%d", j))
	}
	return append(names, "router")
}

// Place has the signature of launcher.Config.Place: each member runs in its namespace,
// bound to its address; other names stay here.
func (n *Net) Place(name string) (launcher.Placement, bool) {
	m, err := n.Member(name)
	if err != nil {
		return launcher.Placement{}, false
	}
	return launcher.Placement{Host: m.Addr, Wrap: m.Wrap()}, true
}
