// Package cli is the pdserver command line: `colocated`, `prefill` and `decode` workers
// sharing one flag set with SGLang's names, the `router`, `up` (a local topology) and the
// SGLang launch spellings `sglang-server` and `sglang-router`.
//
// A worker command binds the SGLang-named flags straight onto a scheduler.Limits and runs:
//
//	flags.validate()                          // every problem at once, each naming its flag;
//	                                          // the limits by scheduler.Limits.Validate only
//	info := kernels.Describe(kc)              // KV bytes per token
//	kc.NumPages = engine.PoolPages(...)       // --max-total-tokens or fraction × memory
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
// The failpoint admin API (--enable-fault-injection) takes its bearer token from
// $PDSOAK_FAULT_INJECTION_TOKEN or --fault-injection-token-file, never from a flag value
// (which every local user sees in ps), and the token is never logged.
//
// Exit codes are decided only here: Execute prints errors through ErrorText (every line
// "pdserver: ...", no internal package names) and ExitCode gives 2 for usage errors
// (UsageError, unknown commands and flags, no command at all) and 1 for anything else.
// `pdserver completion bash|zsh|fish` prints shell completion; --version prints
// version.String().
package cli
