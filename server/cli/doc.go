// Package cli is the pdserver command line: `colocated`, `prefill` and `decode` workers
// sharing one flag set with SGLang's names, plus whatever other files of the package
// register in extraCommands (router.go: `router`, up.go: `up`).
//
// A worker command turns flags into configurations and runs:
//
//	flags.validate()                          // every problem at once, each naming its flag
//	info := kernels.Describe(kc)              // KV bytes per token
//	kc.NumPages = kvpool.Capacity(...)        // --max-total-tokens or fraction × memory
//	backend := kernels.New(kc)
//	eng := engine.New(backend, ec, WithRegisterer(reg), WithTransfer(kv)) // kv: PD roles
//	h := api.New(eng, ...)                    // OpenAI API, /generate, /health, /metrics ...
//	api.Serve(ctx, ln, h)                     // until SIGINT/SIGTERM: drain, grace, abort
//	eng.Shutdown(ctx); kv.Close()
//
// Prefill workers also listen on --disaggregation-bootstrap-port for decode workers'
// KV connections (kvTransfer adapts server/kvtransfer to engine.Transfer); the address
// is on /server_info as "bootstrap_addr" and in the "pdserver: listening" log line.
//
// Exit codes are decided only here and in main: ExitCode gives 2 for usage errors
// (UsageError, unknown commands and flags) and 1 for anything else.
package cli
