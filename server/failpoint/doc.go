// Package failpoint is an in-process failpoint registry for the reference server, with
// gofail's term grammar plus a "pause" action, and an authenticated admin HTTP handler that
// the chaos package drives.
//
// Why not go.etcd.io/gofail/runtime: it has no "pause", its sleep ignores contexts and
// cannot be released early, it draws percentages from the global math/rand, prints parse
// errors to stdout and keeps one unexported registry per process. This package keeps the
// grammar (a superset of it) and adds what the harness needs: a pause that holds until the
// failpoint is cleared, context-aware sleeps, seeded percentages, hit counters for
// verification and a loopback-only, token-protected admin endpoint.
//
// # Grammar
//
//	chain  := term ( "->" term )*
//	term   := [p%] [n*] action [ "(" arg ")" ]
//	action := off | return(arg) | sleep(duration | ms) | panic[(msg)] | print[(msg)] | pause
//
// Terms are tried left to right; the first whose modifiers allow it fires and ends the
// evaluation. "n*" lets a term fire n times; "p%" fires it with probability p (drawn from a
// generator seeded by WithSeed). Examples:
//
//	return(corrupt)              every evaluation returns "corrupt"
//	1*return(drop)               the first evaluation returns "drop", later ones nothing
//	25%sleep(200ms)              a quarter of evaluations sleep 200 ms
//	3*off->pause                 let three through, then hold everyone until Disable
//	sleep(50)                    sleep 50 ms (an integer is milliseconds, as in gofail)
//
// # Failpoints the reference server evaluates
//
//   - "engine/step" (EngineStep): evaluated by a worker's driver loop before each
//     scheduler step. sleep/pause stall the scheduler (chaos scheduler_stall): queues keep
//     filling while nothing progresses, which /health must report. return(x) fails the
//     step's batch with an error naming x.
//   - "engine/admit" (EngineAdmit): evaluated when a request is admitted.
//     return(overloaded) refuses it as overloaded (503 + Retry-After), return(unavailable)
//     and return(timeout) with those errors, any other argument as an internal error;
//     sleep/pause delay admission.
//   - "kvtransfer/send-frame" (KVTransferSendFrame): evaluated by the prefill sender
//     before each KV frame. return(corrupt) flips one payload byte after the checksum was
//     computed (decode must detect it); return(drop) closes the connection; sleep/pause
//     stall the transfer (chaos kv_transfer_stall / _drop / _corrupt).
//   - "api/health" (APIHealth): evaluated by every process's /health handler.
//     return(ok) makes /health answer 200 whatever the process's state (a health that
//     lies, for the harness's truthful_health check).
//   - "kvtransfer/bootstrap" (KVTransferBootstrap): evaluated when the bootstrap server
//     handles a decode worker's registration for a room. sleep/pause stall the bootstrap
//     (chaos bootstrap_stall); return(fail) refuses it.
//
// # Use in server code
//
//	if v, err := failpoint.Eval(ctx, failpoint.KVTransferSendFrame); err != nil {
//		return err // ctx ended while a sleep or pause held us
//	} else if v == "corrupt" {
//		payload[0] ^= 0xff
//	}
//
// Eval costs one atomic load while nothing is enabled.
//
// # Admin API
//
// The server mounts AdminHandler(token) at "/admin/" only when started with
// --enable-fault-injection (without the flag the route does not exist: 404):
//
//	curl -X PUT -H "Authorization: Bearer $T" --data 'pause' \
//	     http://127.0.0.1:PORT/admin/failpoints/engine/step
//	curl -H "Authorization: Bearer $T" http://127.0.0.1:PORT/admin/failpoints/engine/step
//	  {"name":"engine/step","terms":"pause","enabled":true,"evals":4,"hits":4,"paused":1,...}
//	curl -X DELETE -H "Authorization: Bearer $T" http://127.0.0.1:PORT/admin/failpoints/engine/step
//
// Client is the Go side of the same API, used by the chaos package.
package failpoint
