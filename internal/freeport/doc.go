// Package freeport picks TCP ports that are free now on a local address (loopback by default),
// for a process that must be told its port before it starts (a launch pack's --port, the
// launcher's workers, a test's server).
//
// Why not a listener on port 0: the kernel hands out a port from its ephemeral range,
// and once that listener closes the same port soon goes to the next listener on port 0
// or to an outgoing connection's local end (a parallel test's proxy, the harness's own
// client), which then holds it when the process binds it ("address already in use").
// Ports are drawn at random below the ephemeral range instead, where the kernel never
// hands one out by itself.
//
//	ports, err := freeport.Loopback(3) // three distinct ports, bindable a moment ago
package freeport
