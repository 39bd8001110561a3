// Package scheduler is the pure state machine of one worker (colocated, prefill or
// decode): requests arrive, queue, get KV pages, run in a continuously batched forward
// step, transfer KV between PD workers, and finish. It has no goroutines, channels, I/O,
// clock or randomness: every method takes the current time as an argument, and decisions
// come out as data (Ready) that the driver (server/engine) carries out. Tests step it
// deterministically with scripts in testdata/.
//
// Queues per role (gauge names in parentheses):
//
//	colocated: waiting (num_queue_reqs) → running (num_running_reqs)
//	prefill:   bootstrap (num_prefill_prealloc_queue_reqs) → waiting → forward
//	           (num_running_reqs) → inflight (num_prefill_inflight_queue_reqs)
//	decode:    prealloc (num_decode_prealloc_queue_reqs) → transfer
//	           (num_decode_transfer_queue_reqs) → waiting → running, plus retracted
//	           (num_retracted_reqs)
//
// Configuration: Limits holds every SGLang-named bound of a worker (--max-queued-requests,
// --context-length, the stage timeouts, ...). It is the only place they are checked:
// Limits.Validate reports every problem at once as *LimitError values naming the flag,
// the CLI maps its flags onto a Limits and calls it, and engine.Config embeds it.
// Limits.Bounds applies the semantics' timeout defaults (0: default, < 0: off).
//
// The driver's loop (etcd raft's Step/Ready pattern):
//
//	s, _ := scheduler.New(cfg)
//	for {
//		// events, as they come: s.Arrive, s.Abort, s.Registered, s.Received, s.Sent
//		s.Tick(now)                 // stage bounds, total deadline, watchdog
//		rd := s.Ready(now)          // plans a batch when none is in flight
//		// deliver rd.Emits and rd.Finished, start rd.Transfers / rd.Sends, rd.Cancels
//		if rd.Batch != nil {
//			backend.Forward(rd.Batch, out)
//			s.StepDone(now, out, err)
//		}
//	}
//
// Semantics: SemanticsStrict bounds every stage, applies --max-queued-requests to every
// role, refuses a request whose KV can never fit the pool, refuses new requests (503 with
// Retry-After) while queued ones already wait for pages that are not free, never blocks
// the prealloc queue on its head, and runs a watchdog that fails requests when nothing
// progresses while work is queued. SemanticsSGLang reproduces
// SGLang's PD behaviour: no queue limit in PD roles, FIFO prealloc that stops at the
// first request that does not fit and admits nothing while a request is retracted, no
// prealloc or transfer bound, a busy-only watchdog, optimistic health and decode gauges
// refreshed only every DecodeLogInterval decode steps.
//
// On top of SemanticsSGLang, Limits.SGLangBugs (--sglang-bug) switches on reproductions
// of upstream SGLang PD bugs, one Bug each (bugs.go lists them with their upstream
// reference; scenarios/zoo runs each). The scheduler carries those whose mechanism lives
// in its queues; the router, the engine loop and the KV receiver carry the others.
package scheduler
