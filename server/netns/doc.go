// Package netns builds a small network of Linux network namespaces for the reference
// topology: one namespace per process, each with a veth pair whose host end joins a
// bridge in the caller's namespace, so that every process has its own address and
// traffic between them (HTTP, KV transfer) crosses real interfaces. The caller's
// namespace is a member of the bridge too, so the harness reaches every process.
//
// It drives iproute2's `ip` and `tc` and needs root. Everything is named with a prefix:
// Cleanup(prefix) removes what a crashed run left behind, Net.Close removes what Create
// made. Faults: Down/Up on a member's veth (a partition of that process), Bandwidth
// (tc tbf), and Netem where the kernel has the netem qdisc (HasNetem).
package netns
