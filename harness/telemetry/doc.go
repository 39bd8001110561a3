// Package telemetry makes a run visible while it happens: it follows the ledger's event
// stream (harness.Options.OnEvent: the one hook) and exports it as
//
//   - Prometheus series (prefix pdsoak_) on a /metrics listener (Listen), pulled;
//   - the same series pushed by Prometheus remote write 1.0 (Pusher) every few seconds,
//     with a final push when the run ends (client_golang/exp's remote.API for the
//     transport, a small protowire encoder for the 1.0 message: see rwproto.go);
//   - one OTLP/HTTP span per request (Tracer), with the trace and span ids of the
//     request's W3C traceparent (package traceparent), so the harness's span is the
//     parent of the server's spans.
//
// Nothing here decides a verdict: the ledger stays the record, the reports package
// judges it. Main loop:
//
//	t, err := telemetry.Start(ctx, telemetry.Config{MetricsListen: ":9464", Labels: ...})
//	harness.Run(ctx, sc, harness.Options{OnEvent: t.Observe, ...}) // every event feeds it
//	render.WriteAll(outDir, res)                                    // still scrapeable
//	t.Close(ctx)                                                     // final push, span flush
package telemetry
