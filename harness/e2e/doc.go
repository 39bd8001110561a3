// Package e2e holds the end-to-end fault tests of issue 5: every fault type the chaos
// package registers is applied to the reference PD server (router, prefill and decode as
// separate processes) in a short scenario, through the real harness binary, and the run
// must pass with strict semantics — exit 0, zero silent drops, no leaks, the fault
// verified, recovery after it — while the incident's load under SGLang semantics must
// fail with silent drops held in decode's prealloc queue (TestIncident*), and a fault that
// only strict semantics bounds (a KV transfer stalled longer than the deadlines) must pass
// under strict and fail under sglang with its drops held in decode's transfer queue
// (TestSemanticsPairs).
//
// The package has no non-test code. Its main loop (TestMain and TestFaults):
//
//	go build -o $tmp/harness ./cmd/harness                  // once; carries the hidden pdserver
//	for each case (in parallel, -parallel bounds it):
//	    write $tmp/<case>.yaml                               // short strict scenario, its faults
//	    $tmp/harness run <case>.yaml --out DIR --quiet       // a subprocess: exit code checked
//	    read DIR/results.json                                // verdict, drops, leak check, faults
//
// TestCatalogueCovered fails when chaos registers a fault type that no case applies, so
// the catalogue and these tests cannot drift apart. The whole package takes about two
// minutes on two cores; -short skips the runs (the coverage guard still runs).
package e2e
