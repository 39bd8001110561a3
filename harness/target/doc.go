// Package target gives the harness the server under test: an external URL, the
// processes of a scenario's target.launch, or the embedded reference server (the
// launcher's PD topology, or one colocated process). Every process the harness starts
// runs under pdsoak/supervisor: its own process group, Pdeathsig, a log in
// <out>/logs/<name>.log, a bounded health wait and a bounded SIGTERM→SIGKILL stop.
//
//	var t target.Target
//	switch {
//	case len(sc.Target.Launch) > 0:
//		// link proxies first ({link:NAME} in commands and target.url), then each process
//		// in order, health-waited, then OpenExternal; Stop checks no process group remains
//		t, err = target.StartLaunched(ctx, sc.Target, logDir, opts...)
//	case sc.Embedded():
//		t, err = target.StartEmbedded(ctx, sc.Reference, pdserverArgv, logDir, opts...)
//	default:
//		t, err = target.OpenExternal(ctx, sc.Target, opts...)         // TCP reachability within the reach timeout
//	}
//	defer t.Stop(ctx)
//	c := client.New(t.URL()); sample(t.MetricsSources()); probe(t.DebugSources())
//	// MetricsSources: target.metrics_url, target.metrics_urls, each launched metrics_url
//	if sup, ok := t.(target.Supervisor); ok { /* process, failpoint and link faults */ }
//
// The fault-injection token of the embedded server is random per run and reaches the
// workers only through their environment (PDSOAK_FAULT_INJECTION_TOKEN): never argv,
// never a log.
package target
