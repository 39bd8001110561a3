// Package forensics writes the evidence bundle of a run in trouble: when the first
// silent drop is noticed, when the run is judged wedged (requests in flight, none
// completing, GPUs idle where NVML can tell) and at the end of a failed run, the
// harness calls Write, which collects into OutDir/forensics/<trigger>/:
//
//	debug-requests/<process>.json   every process's /debug/requests
//	goroutines/<process>.txt        /debug/pprof/goroutine?debug=2 (Go processes)
//	py-spy/<process>.txt            py-spy dump --pid (Python processes, py-spy on PATH)
//	metrics/<process>.txt           a /metrics snapshot of each endpoint
//	proc/<process>.json             /proc state, threads, open fds, cmdline
//	logs/<file>                     the last lines of each launched process's log
//	nvml.json                       GPUs and their processes, mapped to process names
//	harness-goroutines.txt          the harness's own goroutine dump
//	MANIFEST.json                   what was collected, what failed and why
//
// Every collector runs in parallel under its own timeout, the whole bundle under a
// bound, and every file is capped (truncated with a marker). A collector that fails
// writes a <file>.error.txt note and an entry in the manifest; it never fails the
// bundle. The main loop:
//
//	rel := "forensics/first-drop-12s"
//	m, err := forensics.Write(ctx, filepath.Join(out, rel), "first-drop", "request r7", src, cfg)
//	led.Emit(ledger.Event{Type: ledger.EventNote, Message: m.Note(rel)}) // err: the dir or manifest
//
// Detector is the wedge judgement, a pure state machine fed with the time, the
// requests in flight, the completions so far and whether the GPUs are idle.
package forensics
