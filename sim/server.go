package sim

import (
	"errors"

	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

// Server is the simulated target as the harness side sees it: what the HTTP front end
// of the router (or of a colocated worker) would do, minus HTTP. The topology implements
// it; the harness side calls it only from callbacks of the Loop, at virtual time
// loop.Now().
type Server interface {
	// Submit hands a request to the front end at loop.Now(). It either refuses at once
	// — an error wrapping one of gen's sentinels (gen.ErrOverloaded with a
	// *gen.OverloadError for Retry-After, gen.ErrUnavailable, gen.ErrContextLength,
	// gen.ErrInvalid, ...), which the caller maps to the status the real API would
	// send — or accepts: emit is then called later, from Loop events, with the stream's
	// gen.Events; exactly one has Done set and it is the last. As in the real API, the
	// response headers go out with the first event (200 with a token, or the error
	// status when the first event is a failure), not at Submit. req.Deadline, when set, bounds the request on the
	// server as in the real server.
	//
	// cancel is the client going away (a disconnect): the server aborts the request as
	// the real one would (or, under a --sglang-bug that loses aborts, does not), and emit
	// is not called again after cancel returns.
	Submit(req *gen.Request, emit func(gen.Event)) (cancel func(), err error)

	// Requests lists every request in flight on the router and each worker, as the
	// real /debug/requests endpoints would show them, keyed by process name ("router",
	// "prefill-0", "decode-0", "colocated"). The harness attaches the entries for a
	// request to its silent-drop done event (server_debug), as a real run does.
	Requests() map[string][]gen.RequestInfo

	// Gauges is what a scrape of each process's /metrics would read now: process name →
	// metric name (sglang:num_running_reqs, sglang:num_queue_reqs, ...) → value. The
	// harness samples it and runs the leak check on it.
	Gauges() map[string]map[string]float64

	// Fault starts a server-side fault of the chaos catalogue at loop.Now() (crash,
	// pause, link latency/partition/bandwidth/reset, KV stall/drop/corrupt, pool
	// exhaustion, scheduler stall, ...); stop reverts it. A fault the topology cannot
	// model returns an error wrapping ErrNotModelled that says why; CanModel answers the
	// same question before the run starts, so a run is refused up front, never halfway.
	Fault(f scenarios.Fault) (stop func(), err error)
	CanModel(f scenarios.Fault) error
}

// ErrNotModelled marks a scenario feature the simulator cannot model; `harness run
// --sim` refuses such a scenario (exit 2) with the reason.
var ErrNotModelled = errors.New("sim: not modelled")
