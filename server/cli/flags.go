package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/kernels"
	"pdsoak/server/engine"
	"pdsoak/server/kvtransfer"
	"pdsoak/server/scheduler"
)

// secondsValue is a duration flag that takes SGLang's plain seconds ("300", "0.5") as well
// as Go durations ("5m", "250ms"). 0 means the default of the semantics, a negative value
// turns the bound off (see engine.Config).
type secondsValue time.Duration

func (s *secondsValue) String() string { return time.Duration(*s).String() }
func (s *secondsValue) Type() string   { return "seconds" }
func (s *secondsValue) Set(v string) error {
	v = strings.TrimSpace(v)
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e9 {
			return fmt.Errorf("%q is not a usable number of seconds", v)
		}
		*s = secondsValue(time.Duration(f * float64(time.Second)))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is neither seconds nor a duration like 30s", v)
	}
	*s = secondsValue(d)
	return nil
}

// FaultTokenEnv is the environment variable that carries the failpoint admin API's
// bearer token (a flag would show it to every local user in ps).
const FaultTokenEnv = "PDSOAK_FAULT_INJECTION_TOKEN"

// workerFlags are the flags shared by colocated, prefill and decode, named as SGLang
// names them. The worker's limits are bound straight onto a scheduler.Limits, which
// validates them.
type workerFlags struct {
	host                 string
	port                 int
	modelName            string
	backend              string
	seed                 uint64
	simProfile           string
	simJitter            float64 // --sim-jitter
	simSlowdown          float64 // --sim-slowdown
	limits               engine.Limits
	disableOverlap       bool
	disableRadixCache    bool
	shutdownGrace        secondsValue
	bootstrapPort        int
	logLevel             string
	logFormat            string
	enableFaultInjection bool
	faultTokenFile       string
	waitingTimeout       secondsValue
	heartbeatInterval    secondsValue
	heartbeatMaxFailure  int

	// faultToken is resolved by validate from faultTokenFile or FaultTokenEnv; never
	// log it.
	faultToken string
	getenv     func(string) string
}

// DefaultPort is --port's default (SGLang's).
const DefaultPort = 30000

// DefaultBootstrapPort is --disaggregation-bootstrap-port's default (SGLang's).
const DefaultBootstrapPort = 8998

func defaultWorkerFlags() *workerFlags {
	l := engine.DefaultConfig().Limits
	l.PageSize = kernels.DefaultPageSize
	return &workerFlags{
		host: "127.0.0.1", port: DefaultPort, modelName: kernels.DefaultModel, backend: kernels.BackendTinyRef,
		seed: 1, simProfile: kernels.DefaultProfile, simJitter: kernels.DefaultJitter, limits: l,
		bootstrapPort: DefaultBootstrapPort, logLevel: "info", logFormat: "text",
		shutdownGrace: secondsValue(30 * time.Second), getenv: os.Getenv,
	}
}

// durationVar binds a secondsValue flag to a time.Duration.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name, usage string) {
	fs.Var((*secondsValue)(p), name, usage)
}

// semanticsValue is --semantics bound to the limits' Semantics.
type semanticsValue engine.Semantics

func (s *semanticsValue) String() string     { return string(*s) }
func (s *semanticsValue) Type() string       { return "strict|sglang" }
func (s *semanticsValue) Set(v string) error { *s = semanticsValue(v); return nil }

// register adds the flags to fs. bootstrap adds --disaggregation-bootstrap-port (prefill).
func (f *workerFlags) register(fs *pflag.FlagSet, bootstrap bool) {
	l := &f.limits
	fs.StringVar(&f.host, "host", f.host, "address to listen on")
	fs.IntVar(&f.port, "port", f.port, "HTTP port (0 picks a free one; the bound address is logged)")
	fs.StringVar(&f.modelName, "model-name", f.modelName, "model id served on /v1/models and required in requests")
	fs.StringVar(&f.backend, "backend", f.backend, "compute backend: "+strings.Join(kernels.Backends(), "|"))
	fs.Uint64Var(&f.seed, "seed", f.seed, "seed of the tinyref weights and the simtime jitter")
	fs.StringVar(&f.simProfile, "sim-profile", f.simProfile, "simtime timing profile (simtime, paced)")
	fs.Float64Var(&f.simJitter, "sim-jitter", f.simJitter, "relative amplitude of the seeded step-time jitter, in [0, 1) (simtime, paced)")
	fs.Float64Var(&f.simSlowdown, "sim-slowdown", f.simSlowdown, "make every step this much slower (0.1: 10%; simtime, paced): a known regression, for calibrating compare")
	fs.IntVar(&l.MaxQueuedRequests, "max-queued-requests", l.MaxQueuedRequests, "requests admitted but not running; above it 503 (0: no limit)")
	fs.IntVar(&l.MaxRunningRequests, "max-running-requests", l.MaxRunningRequests, "size bound of the running batch")
	fs.IntVar(&l.ContextLength, "context-length", l.ContextLength, "prompt + max_tokens above it is refused with 400")
	fs.Float64Var(&l.MemFractionStatic, "mem-fraction-static", l.MemFractionStatic, "fraction of --device-memory-gb given to the KV pool")
	fs.Float64Var(&l.DeviceMemoryGB, "device-memory-gb", l.DeviceMemoryGB, "modelled device memory in GiB (0 with --max-total-tokens 0: the backend's default pool)")
	fs.IntVar(&l.MaxTotalTokens, "max-total-tokens", l.MaxTotalTokens, "KV pool size in tokens (overrides the memory fraction)")
	fs.IntVar(&l.PageSize, "page-size", l.PageSize, "tokens per KV page (0: the backend's)")
	fs.IntVar(&l.CudaGraphMaxBS, "cuda-graph-max-bs", l.CudaGraphMaxBS, "caps the decode batch (0: no cap)")
	fs.IntVar(&l.MaxPrefillTokens, "max-prefill-tokens", l.MaxPrefillTokens, "new prompt tokens admitted into one step")
	fs.IntVar(&l.ChunkedPrefillSize, "chunked-prefill-size", l.ChunkedPrefillSize, "prefill longer prompts in chunks of this many tokens (0: off)")
	fs.BoolVar(&f.disableOverlap, "disable-overlap-schedule", f.disableOverlap, "accepted for SGLang compatibility; scheduling never overlaps compute here")
	fs.BoolVar(&f.disableRadixCache, "disable-radix-cache", false, "turn off the radix prefix cache (prefill and colocated workers reuse cached prompt prefixes by default, as SGLang)")
	durationVar(fs, &l.WatchdogTimeout, "watchdog-timeout", "fail requests and /health when nothing progresses for this long (seconds or duration; 0: semantics default, <0: off)")
	durationVar(fs, &l.BootstrapTimeout, "bootstrap-timeout", "prefill bootstrap bound (0: default, <0: off)")
	durationVar(fs, &l.PreallocTimeout, "prealloc-timeout", "decode prealloc wait bound (0: default, <0: off)")
	durationVar(fs, &l.TransferTimeout, "transfer-timeout", "KV transfer bound (0: default, <0: off)")
	durationVar(fs, &l.WaitingTimeout, "waiting-timeout", "waiting queue bound (0: default, <0: off)")
	durationVar(fs, &l.RunningTimeout, "running-timeout", "running batch bound (0: default, <0: off)")
	durationVar(fs, &l.RequestTimeout, "request-timeout", "whole-request bound (0: default, <0: off)")
	fs.Var(&f.shutdownGrace, "shutdown-grace", "on SIGINT/SIGTERM, how long in-flight requests may finish before they are aborted")
	fs.Var((*semanticsValue)(&l.Semantics), "semantics", "strict (every invariant) or sglang (SGLang's PD behaviour)")
	fs.IntVar(&l.DecodeLogInterval, "decode-log-interval", l.DecodeLogInterval, "decode steps between gauge refreshes of a decode worker in sglang semantics")
	fs.Var(&f.waitingTimeout, "disaggregation-waiting-timeout", "sglang semantics, decode: SGLANG_DISAGGREGATION_WAITING_TIMEOUT, the bound on a KV transfer waiting for its first frame and (unless --sglang-bug=transferring-never-times-out) between frames (0: off)")
	fs.IntVar(&l.ReservedDecodeTokens, "num-reserved-decode-tokens", l.ReservedDecodeTokens, "SGLANG_NUM_RESERVED_DECODE_TOKENS: KV headroom the sglang decode prealloc keeps per request")
	fs.Var(&l.SGLangBugs, "sglang-bug", "reproduce an upstream SGLang PD bug (repeatable; needs --semantics sglang; see `pdserver` docs and scenarios/zoo)")
	durationVar(fs, &l.RetryAfter, "retry-after", "Retry-After hint sent with 503 overload refusals (seconds or duration)")
	if bootstrap {
		fs.IntVar(&f.bootstrapPort, "disaggregation-bootstrap-port", f.bootstrapPort, "port of the KV bootstrap server decode workers dial (0 picks a free one)")
	}
	fs.Var(&f.heartbeatInterval, "kv-heartbeat-interval", "how often each side of the KV link sends a heartbeat (SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL; 0: "+kvtransfer.DefaultHeartbeatInterval.String()+")")
	fs.IntVar(&f.heartbeatMaxFailure, "kv-heartbeat-max-failure", 0, "heartbeats missed in a row before the KV link is declared dead (SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE; 0: an idle bound of "+kvtransfer.DefaultIdleTimeout.String()+")")
	fs.StringVar(&f.logLevel, "log-level", f.logLevel, "debug|info|warn|error")
	fs.StringVar(&f.logFormat, "log-format", f.logFormat, "text|json")
	fs.BoolVar(&f.enableFaultInjection, "enable-fault-injection", false,
		"serve the failpoint admin API under /admin/ (loopback only; its bearer token comes from $"+FaultTokenEnv+" or --fault-injection-token-file)")
	fs.StringVar(&f.faultTokenFile, "fault-injection-token-file", "", "file holding the failpoint admin API's bearer token (read once, trimmed; overrides $"+FaultTokenEnv+")")
	_ = cobra.MarkFlagFilename(fs, "fault-injection-token-file")
}

// validate checks the flags, naming each flag; every problem at once. The limits are
// checked by scheduler.Limits.Validate, nothing here repeats them. It also resolves the
// fault-injection token.
func (f *workerFlags) validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s", flag, fmt.Sprintf(format, args...)))
	}
	if f.host == "" {
		bad("--host", "must not be empty")
	}
	if f.port < 0 || f.port > 65535 {
		bad("--port", "must be in [0, 65535] (got %d)", f.port)
	}
	if f.modelName == "" {
		bad("--model-name", "must not be empty")
	}
	switch f.backend {
	case kernels.BackendTinyRef, kernels.BackendSimTime, kernels.BackendPaced:
	default:
		bad("--backend", "%q is unknown (valid: %s)", f.backend, strings.Join(kernels.Backends(), ", "))
	}
	if f.backend != kernels.BackendTinyRef {
		if _, err := kernels.LookupProfile(f.simProfile); err != nil {
			errs = append(errs, fmt.Errorf("--sim-profile: %s", userMessage(err)))
		}
	}
	errs = append(errs, flagErrors(f.limits.Validate())...)
	if f.shutdownGrace < 0 {
		bad("--shutdown-grace", "must be >= 0 (got %s)", time.Duration(f.shutdownGrace))
	}
	if f.heartbeatInterval < 0 {
		bad("--kv-heartbeat-interval", "must be >= 0 (got %s)", time.Duration(f.heartbeatInterval))
	}
	if f.heartbeatMaxFailure < 0 {
		bad("--kv-heartbeat-max-failure", "must be >= 0 (got %d)", f.heartbeatMaxFailure)
	}
	if f.waitingTimeout < 0 {
		bad("--disaggregation-waiting-timeout", "must be >= 0 (got %s)", time.Duration(f.waitingTimeout))
	} else if f.waitingTimeout > 0 && f.limits.Semantics != engine.SemanticsSGLang {
		bad("--disaggregation-waiting-timeout", "applies to --semantics sglang only (strict bounds transfers with --transfer-timeout)")
	}
	if f.bootstrapPort < 0 || f.bootstrapPort > 65535 {
		bad("--disaggregation-bootstrap-port", "must be in [0, 65535] (got %d)", f.bootstrapPort)
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		bad("--log-level", "%v", err)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		bad("--log-format", "%q is unknown (text, json)", f.logFormat)
	}
	if err := f.resolveFaultToken(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// resolveFaultToken reads the failpoint admin token from --fault-injection-token-file
// or $PDSOAK_FAULT_INJECTION_TOKEN. Its errors never contain the token.
func (f *workerFlags) resolveFaultToken() error {
	f.faultToken = ""
	if !f.enableFaultInjection {
		if f.faultTokenFile != "" {
			return errors.New("--fault-injection-token-file has no effect without --enable-fault-injection")
		}
		return nil
	}
	if f.faultTokenFile != "" {
		b, err := os.ReadFile(f.faultTokenFile)
		if err != nil {
			return fmt.Errorf("--fault-injection-token-file: cannot read %s: %w", f.faultTokenFile, unwrapPathError(err))
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return fmt.Errorf("--fault-injection-token-file: %s is empty; it must hold the admin API's bearer token", f.faultTokenFile)
		}
		f.faultToken = tok
		return nil
	}
	getenv := f.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if tok := strings.TrimSpace(getenv(FaultTokenEnv)); tok != "" {
		f.faultToken = tok
		return nil
	}
	return fmt.Errorf("--enable-fault-injection needs a bearer token: set $%s or pass --fault-injection-token-file PATH", FaultTokenEnv)
}

// unwrapPathError drops the operation and path of an *fs.PathError (the message
// already names the file).
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// flagErrors turns the joined *scheduler.LimitError of Limits.Validate into messages
// that name the flag without the package prefix.
func flagErrors(err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range splitJoined(err) {
		var le *scheduler.LimitError
		if errors.As(e, &le) {
			out = append(out, errors.New(le.Flag+" "+le.Problem))
			continue
		}
		out = append(out, errors.New(userMessage(e)))
	}
	return out
}

// splitJoined returns the errors an errors.Join holds, or err alone.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []error{err}
}

// kernelsConfig is the backend configuration of the flags; NumPages is set by the caller.
func (f *workerFlags) kernelsConfig() kernels.Config {
	kc := kernels.DefaultConfig()
	kc.Backend = f.backend
	kc.Model = f.modelName
	kc.Seed = f.seed
	kc.Profile = f.simProfile
	kc.Jitter, kc.Slowdown = f.simJitter, f.simSlowdown
	kc.PageSize = f.pageSize()
	return kc
}

// pageSize is --page-size, or the backend's default for 0 (as the engine reads it).
func (f *workerFlags) pageSize() int {
	if f.limits.PageSize == 0 {
		return kernels.DefaultPageSize
	}
	return f.limits.PageSize
}

// engineConfig is the engine configuration of the flags for role.
func (f *workerFlags) engineConfig(role engine.Role) engine.Config {
	l := f.limits
	l.RadixCache = l.RadixCache && !f.disableRadixCache
	return engine.Config{Role: role, Limits: l, DisableOverlapSchedule: f.disableOverlap}
}
