// Package workload generates the harness's load: agent sessions, open-loop arrivals
// paced by vegeta, and bursts. Every request is built from the scenario seed alone, so
// the same scenario and seed send the same requests with the same ids.
//
// A workload only decides what to send and when; a Sender (the runner's executor)
// sends it, records the ledger events and returns the classified result. A failed
// request is a field of its result, never a reason to stop.
//
//   - agents: N sessions; each turn sends the whole growing conversation, appends the
//     reply and a simulated tool result (write, then save) of configurable size after a
//     configurable latency. A stuck request blocks its session, as in the incident.
//     A refused turn (429/503) waits Retry-After and is re-sent up to `retries` times,
//     each attempt its own request (id suffix -r1, -r2, ...). The re-sends of all
//     sessions share one retry budget (an x/time/rate token bucket, RetryBudget): a
//     fleet of refused agents retries at a bounded rate, and a retry that would wait
//     longer than MaxRetryBudgetWait for the budget is not made. With `restart`, a session
//     that finished its turns starts a fresh conversation (ids -c002-t001, ...) until
//     the window ends.
//   - open_loop: vegeta's Attacker loop (attack: a pacer, workers that start when all
//     are busy, up to max_in_flight) whose hits go straight to the Sender, so TTFT and
//     stalls are observed; vegeta's pacers constant, linear, sine and a seeded Poisson
//     pacer. Latency is measured from each hit's ideal time in the
//     pacer's schedule, not from when vegeta got round to it (coordinated omission).
//   - burst: Count requests scheduled at the same instant.
//
// The decisions are pure and the drivers are two: each Run is a goroutine driver (it
// sleeps and sends), and the simulator (pdsoak/sim) drives the same decisions on its
// event loop. An agent is a state machine, Session (Start, Req, Result, Stop: it says
// what to wait and what to send, never waits itself); a burst's requests are
// Burst.Requests, a probe round Probe.Round, a trace's arrivals Trace.Arrivals, an
// open loop's hits Schedule. The ledger events of a request are built here too
// (ScheduledEvent, SentEvent, HeadersEvent, FirstTokenEvent, DoneEvent), for the
// executor and the simulator alike.
//
// Main loop (the runner):
//
//	w, _ := workload.New(sc, i)
//	w.Run(loadCtx, t0, sender) // returns when its window is over and its requests ended
package workload
