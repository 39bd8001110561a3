// Package engine drives one worker of the reference server: a colocated, prefill or decode
// engine. It owns a kernels.Backend and a scheduler.Scheduler and runs them on a single
// goroutine; HTTP handlers reach it through gen.Generator and gen.Inspector.
//
// The loop (one goroutine, the only one that touches the scheduler, the pool and the
// backend):
//
//	for {
//		drain the inbox: arrivals, aborts (ctx cancelled), transfer events
//		sched.Tick(now)                       // stage bounds, watchdog
//		rd := sched.Ready(now)                // decisions as data
//		deliver rd.Emits / rd.Finished to request channels (never blocking)
//		start rd.Transfers / rd.Sends, cancel rd.Cancels
//		if rd.Batch != nil {
//			failpoint "engine/step" (when enabled it runs aside: the loop keeps
//			    admitting, timing out and watching until it returns)
//			backend.Forward(rd.Batch, out); wait backend.StepTime(...) (still admitting)
//			sched.StepDone(now, out)
//		} else { wait for the inbox or the next tick }
//	}
//
// The loop's rules live in Core, an event-driven state machine with its IO behind Host
// (core.go): when to iterate and tick, the bootstrap retries of
// BugBootstrapRetryEveryStep, a step held on its failpoint (serving meanwhile), a step
// taking its modelled time, what is published and when a request list is built. The
// loop goroutine above is its driver: it hands the inbox's events in, calls
// Core.Advance, and waits for the inbox, a failpoint's answer or the time Advance
// returned. The simulator (sim) drives the same Core on its virtual clock, so a rule
// changed here changes both.
//
// Requests never wait for a slow client: each has a small buffered channel with one slot
// kept for Done. When the token slots are full, new tokens wait in the loop and go out
// merged, in order, into one event once the client has read (checked every iteration),
// or with Done. The loop only ever sends on the channel: taking unread events back would
// race the client's reads and reorder tokens.
// A request's last tokens ride on its Done event. /debug/requests asks the loop for a
// fresh list (built on demand, not every iteration) and, when the loop does not answer
// within a bound, answers from the last one; /health answers from what the loop
// publishes. Both keep working while the loop is stuck; strict /health also fails when a
// step has not returned within the watchdog timeout.
//
// Config embeds scheduler.Limits (validated once, by Limits.Validate) and adds only the
// role. Warnings that repeat under load (KV retractions) are bounded by an x/time/rate
// limiter on the engine's clock (WithWarnEvery).
//
// Use:
//
//	e, err := engine.New(backend, engine.DefaultConfig(), engine.WithRegisterer(reg))
//	e.Start()
//	ch, err := e.Generate(ctx, &gen.Request{...}) // err wraps gen.ErrOverloaded, ...
//	for ev := range ch { ... }
//	e.Shutdown(ctx)
//
// Overlap scheduling (--disable-overlap-schedule) is not modelled: the engine always plans
// the next step after the previous one completed.
package engine
