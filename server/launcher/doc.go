// Package launcher starts a local PD topology — P prefill workers, D decode workers and
// a router — as supervised child processes on loopback, for `pdserver up`, the harness's
// embedded target and end-to-end tests.
//
//	topo, err := launcher.Start(ctx, launcher.Config{
//		Command: []string{exe}, Prefill: 1, Decode: 1,
//		CommonArgs: []string{"--backend", "tinyref", "--seed", "1"},
//		Links: proxies.Hook, // optional: a fault proxy on "router->prefill-0", "prefill-0->decode-0", ...
//	})
//	defer topo.Stop(ctx)
//	http.Post(topo.RouterURL+"/v1/completions", ...)
//	topo.Kill("decode-0"); topo.Restart(ctx, "decode-0") // same ports
//
// Start runs:
//
//	for each worker: pick free ports, supervisor.Start "<Command> prefill|decode <args> --host H
//	    --port P [--disaggregation-bootstrap-port B]" (env: Env, FaultTokenEnv=FaultToken,
//	    GOMAXPROCS=its share of the CPUs unless set; procs.go)
//	wait for every worker's /health (fail fast, with the log's tail, if one exits; a worker
//	    whose port was taken meanwhile starts again on new ports)
//	supervisor.Start "<Command> router --prefill URL --prefill-bootstrap ADDR ... --decode URL [--kv-link P:D=ADDR]"
//	    (env: Env, FaultTokenEnv=FaultToken)
//	wait for the router's /health
//
// Every child is a pdsoak/supervisor process: its own process group, Pdeathsig=SIGKILL
// (it dies with the launcher, even by SIGKILL), its log in LogDir/<name>.log (appended
// across restarts). An unexpected exit is logged, shown by Processes (Running false,
// Exit) and reported to Config.OnExit. Stop sends SIGTERM to the router, then to the
// workers, and SIGKILL to any process group still alive after StopTimeout. The
// fault-injection token travels only in the processes' environment (the router's too,
// for its own admin API): argv is visible to every local user in ps.
package launcher
