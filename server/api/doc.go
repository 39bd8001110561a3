// Package api is the HTTP front end of a pdsoak process: the OpenAI API
// (/v1/completions, /v1/chat/completions, /v1/models and /v1/models/{id}), the worker
// endpoint the PD router calls (POST /generate, wire format in server/gen/wire.go), and the operational
// endpoints (/health, /metrics, /debug/requests, /debug/pprof/, /server_info, and the
// failpoint admin API under /admin/ when one is given). It is the only place where
// generator errors become HTTP status codes (StatusFor).
//
// A handler wraps any gen.Generator (a local engine or the router); Serve runs it behind
// an http.Server with header, read and idle timeouts and a bounded graceful shutdown:
//
//	h := api.New(engine, api.WithModelName("ref"), api.WithContextLength(4096),
//		api.WithGatherer(registry), api.WithRole("colocated"))
//	err := api.Serve(ctx, listener, h) // until ctx is done, then drain, abort, close
//
// WithLeanGenerate (workers) and WithLeanPaths (the router's OpenAI endpoints) answer
// those POST requests on the package's own connection code instead of net/http's
// (lean.go): a reader parked on each connection sees the peer go away (a dropped leg
// still aborts its generation), the writer puts net/http's bytes on the wire, and any
// other or unusual request hands its connection to net/http.
//
// Each generation request runs this loop:
//
//	parse + validate (400/404/413 before anything runs)
//	ch, err := gen.Generate(ctx, req)  // refusal: error status (503 + Retry-After, ...)
//	for ev := recv(ch) {               // headers are committed at the first event
//		detokenize, cut at a stop string (then cancel the generation), write a chunk
//		on ev.Done: the finish chunk, usage, [DONE]; on ev.Err after headers: an SSE
//		error event and no [DONE]
//	}
//
// The body of that loop is Answer, a state machine with no IO: events in (Event,
// Finish), what to write out (Out: headers and role chunk, data events, [DONE], or a
// whole answer). The handler writes Out on its http.ResponseWriter; the simulator
// (pdsoak/sim) drives the same Answer and writes Out into its in-memory client.
//
// ctx is cancelled when the client goes away or the server aborts in-flight work, and
// the generator then ends the request with ErrAborted.
//
// Prompts are tokenized with the byte-level tokenizer of package kernels; chat messages
// are rendered by ChatTemplate. Errors use the OpenAI shape
// {"error":{"message","type","param","code"}} with error.type = gen.ErrorKind.
package api
