// Package router is the PD router: a gen.Generator and gen.Inspector that serves every
// request with one prefill worker and one decode worker, as SGLang's mini load balancer
// does in PD mode. The router process mounts server/api over it, so clients see the same
// OpenAI API as on a colocated server; its /metrics are the router's own
// (pdsoak_router_*: requests, errors by kind, retries, outstanding per worker, worker
// health).
//
// Each request runs this loop:
//
//	for attempt := 0; ; attempt++ {
//		p, d := least-outstanding healthy prefill and decode (not yet failed for this request)
//		room := random 63-bit bootstrap room (seeded generator)
//		POST /generate {input_ids, sampling_params, bootstrap_room, bootstrap_addr of p} to d, then p
//		stream d's token chunks to the client; d's done event goes to the client at once,
//		then p's leg gets up to the prefill grace to end on its own;
//		p fails before d's first token -> cancel d, end with p's error at once
//		(after it, d has its KV: p's leg and p's health no longer matter)
//		d fails, nothing sent yet and the error is retryable -> next attempt on another pair
//		client goes away   -> cancel both legs (the workers abort and free their KV)
//	}
//
// The legs go over the router's own HTTP/1.1 client (keep-alive connections pooled per
// worker; the request written and the answer read by the leg's goroutine, no hand-off
// to a connection goroutine as in net/http; cancelling a leg closes its connection, so
// the worker sees the request end). net/http serves the health checks, https workers and
// a client given with WithClient. Worker streams are read with pdsoak/sse (events bounded by MaxEventBytes); a stream
// that ends without a done event, or with a malformed event, is a broken leg.
// Workers' error statuses and stream errors come back as the gen sentinel errors they
// were (gen.WorkerError.Err). Health: every worker's /health is polled; a worker that
// fails DefaultFailThreshold checks in a row, or refuses a connection on a request, is
// skipped until it passes again (Health, health.go). The checks run in rounds, every
// worker at once, on one schedule (HealthChecks, healthchecks.go). A prefill's KV bootstrap address comes from its
// /server_info ("bootstrap_addr") unless given explicitly, and is read again at every health
// check, so a restarted prefill is never reached at a stale address.
//
// Each request is a Flow (flow.go): the loop above as an event-driven state machine
// that owns every rule of it (the order of the steps, when a failure dooms an attempt or
// marks a worker down, when the final event goes out, the stages /debug/requests shows),
// with its IO (start and cancel the legs, write to the client, the prefill grace timer)
// behind FlowIO. The Router drives it from one goroutine per request over real sockets
// (attempt.go); the simulator (sim) drives the same Flow from its event loop over
// simulated links. The workers' state (WorkerState: health, outstanding, bootstrap
// address), the decisions (decide.go), the health tracker (health.go), the health
// checks' schedule (HealthChecks), the refusals and a leg's failures (errors.go) are
// likewise one copy for both, and Core (core.go) builds the pool, the Flows'
// configuration and the checks from the router's options for both (New, NewCore).
//
// The driver, by file: router.go (the Router, its lifecycle, Generate, /debug/requests),
// options.go (defaults and functional options), core.go (Core: what the router decides
// with), healthchecks.go (HealthChecks), workers.go (each worker's health checks
// and bootstrap address), workerstate.go (WorkerState, Candidates, Hold, Routable),
// flow.go (Flow, FlowIO), attempt.go (the Router's FlowIO: a request's goroutine, its
// legs and its client), legs.go (the two worker streams of an attempt), legclient.go
// (the lean leg client), fallback.go (--pd-fallback), reqlog.go (a request's lazily
// built logger), metrics.go, sse.go, trace.go.
//
//	r, _ := router.New([]router.Worker{{URL: "http://127.0.0.1:30001"}},
//		[]router.Worker{{URL: "http://127.0.0.1:30002"}}, router.WithSeed(1))
//	r.Start()
//	defer r.Close()
//	h := api.New(r, api.WithRole("router"), api.WithGatherer(r.Gatherer()))
package router
