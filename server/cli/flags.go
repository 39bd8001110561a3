package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"pdsoak/kernels"
	"pdsoak/server/engine"
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

// workerFlags are the flags shared by colocated, prefill and decode, named as SGLang
// names them.
type workerFlags struct {
	host                 string
	port                 int
	modelName            string
	backend              string
	seed                 uint64
	simProfile           string
	maxQueued            int
	maxRunning           int
	contextLength        int
	memFraction          float64
	deviceMemoryGB       float64
	maxTotalTokens       int
	pageSize             int
	cudaGraphMaxBS       int
	maxPrefillTokens     int
	disableOverlap       bool
	watchdog             secondsValue
	bootstrapTimeout     secondsValue
	preallocTimeout      secondsValue
	transferTimeout      secondsValue
	waitingTimeout       secondsValue
	runningTimeout       secondsValue
	requestTimeout       secondsValue
	shutdownGrace        secondsValue
	semantics            string
	decodeLogInterval    int
	retryAfter           secondsValue
	bootstrapPort        int
	logLevel             string
	logFormat            string
	enableFaultInjection bool
	faultToken           string
}

// DefaultPort is --port's default (SGLang's).
const DefaultPort = 30000

// DefaultBootstrapPort is --disaggregation-bootstrap-port's default (SGLang's).
const DefaultBootstrapPort = 8998

func defaultWorkerFlags() *workerFlags {
	ec := engine.DefaultConfig()
	return &workerFlags{
		host: "127.0.0.1", port: DefaultPort, modelName: kernels.DefaultModel, backend: kernels.BackendTinyRef,
		seed: 1, simProfile: kernels.DefaultProfile, maxQueued: ec.MaxQueuedRequests, maxRunning: ec.MaxRunningRequests,
		contextLength: ec.ContextLength, memFraction: ec.MemFractionStatic, pageSize: kernels.DefaultPageSize,
		maxPrefillTokens: ec.MaxPrefillTokens, semantics: string(engine.SemanticsStrict),
		bootstrapPort: DefaultBootstrapPort, logLevel: "info", logFormat: "text",
		shutdownGrace: secondsValue(30 * time.Second), decodeLogInterval: ec.DecodeLogInterval,
		retryAfter: secondsValue(ec.RetryAfter),
	}
}

// register adds the flags to fs. bootstrap adds --disaggregation-bootstrap-port (prefill).
func (f *workerFlags) register(fs *pflag.FlagSet, bootstrap bool) {
	fs.StringVar(&f.host, "host", f.host, "address to listen on")
	fs.IntVar(&f.port, "port", f.port, "HTTP port (0 picks a free one; the bound address is logged)")
	fs.StringVar(&f.modelName, "model-name", f.modelName, "model id served on /v1/models and required in requests")
	fs.StringVar(&f.backend, "backend", f.backend, "compute backend: "+strings.Join(kernels.Backends(), "|"))
	fs.Uint64Var(&f.seed, "seed", f.seed, "seed of the tinyref weights and the simtime jitter")
	fs.StringVar(&f.simProfile, "sim-profile", f.simProfile, "simtime timing profile (simtime, paced)")
	fs.IntVar(&f.maxQueued, "max-queued-requests", f.maxQueued, "requests admitted but not running; above it 503 (0: no limit)")
	fs.IntVar(&f.maxRunning, "max-running-requests", f.maxRunning, "size bound of the running batch")
	fs.IntVar(&f.contextLength, "context-length", f.contextLength, "prompt + max_tokens above it is refused with 400")
	fs.Float64Var(&f.memFraction, "mem-fraction-static", f.memFraction, "fraction of --device-memory-gb given to the KV pool")
	fs.Float64Var(&f.deviceMemoryGB, "device-memory-gb", f.deviceMemoryGB, "modelled device memory in GiB (0 with --max-total-tokens 0: the backend's default pool)")
	fs.IntVar(&f.maxTotalTokens, "max-total-tokens", f.maxTotalTokens, "KV pool size in tokens (overrides the memory fraction)")
	fs.IntVar(&f.pageSize, "page-size", f.pageSize, "tokens per KV page")
	fs.IntVar(&f.cudaGraphMaxBS, "cuda-graph-max-bs", f.cudaGraphMaxBS, "caps the decode batch (0: no cap)")
	fs.IntVar(&f.maxPrefillTokens, "max-prefill-tokens", f.maxPrefillTokens, "new prompt tokens admitted into one step")
	fs.BoolVar(&f.disableOverlap, "disable-overlap-schedule", f.disableOverlap, "accepted for SGLang compatibility; scheduling never overlaps compute here")
	fs.Var(&f.watchdog, "watchdog-timeout", "fail requests and /health when nothing progresses for this long (seconds or duration; 0: semantics default, <0: off)")
	fs.Var(&f.bootstrapTimeout, "bootstrap-timeout", "prefill bootstrap bound (0: default, <0: off)")
	fs.Var(&f.preallocTimeout, "prealloc-timeout", "decode prealloc wait bound (0: default, <0: off)")
	fs.Var(&f.transferTimeout, "transfer-timeout", "KV transfer bound (0: default, <0: off)")
	fs.Var(&f.waitingTimeout, "waiting-timeout", "waiting queue bound (0: default, <0: off)")
	fs.Var(&f.runningTimeout, "running-timeout", "running batch bound (0: default, <0: off)")
	fs.Var(&f.requestTimeout, "request-timeout", "whole-request bound (0: default, <0: off)")
	fs.Var(&f.shutdownGrace, "shutdown-grace", "on SIGINT/SIGTERM, how long in-flight requests may finish before they are aborted")
	fs.StringVar(&f.semantics, "semantics", f.semantics, "strict (every invariant) or sglang (SGLang's PD behaviour)")
	fs.IntVar(&f.decodeLogInterval, "decode-log-interval", f.decodeLogInterval, "decode steps between gauge refreshes of a decode worker in sglang semantics")
	fs.Var(&f.retryAfter, "retry-after", "Retry-After hint sent with 503 overload refusals (seconds or duration)")
	if bootstrap {
		fs.IntVar(&f.bootstrapPort, "disaggregation-bootstrap-port", f.bootstrapPort, "port of the KV bootstrap server decode workers dial (0 picks a free one)")
	}
	fs.StringVar(&f.logLevel, "log-level", f.logLevel, "debug|info|warn|error")
	fs.StringVar(&f.logFormat, "log-format", f.logFormat, "text|json")
	fs.BoolVar(&f.enableFaultInjection, "enable-fault-injection", false, "serve the failpoint admin API under /admin/ (loopback only, needs --fault-injection-token)")
	fs.StringVar(&f.faultToken, "fault-injection-token", "", "bearer token of the failpoint admin API")
}

// validate checks what the flags alone can tell, naming each flag; every problem at once.
func (f *workerFlags) validate() error {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if f.host == "" {
		bad("host", "must not be empty")
	}
	if f.port < 0 || f.port > 65535 {
		bad("port", "must be in [0, 65535] (got %d)", f.port)
	}
	if f.modelName == "" {
		bad("model-name", "must not be empty")
	}
	switch f.backend {
	case kernels.BackendTinyRef, kernels.BackendSimTime, kernels.BackendPaced:
	default:
		bad("backend", "%q is unknown (valid: %s)", f.backend, strings.Join(kernels.Backends(), ", "))
	}
	if f.backend != kernels.BackendTinyRef {
		if _, err := kernels.LookupProfile(f.simProfile); err != nil {
			bad("sim-profile", "%v", err)
		}
	}
	if f.maxQueued < 0 {
		bad("max-queued-requests", "must be >= 0 (got %d)", f.maxQueued)
	}
	if f.maxRunning <= 0 {
		bad("max-running-requests", "must be > 0 (got %d)", f.maxRunning)
	}
	if f.contextLength <= 1 {
		bad("context-length", "must be > 1 (got %d)", f.contextLength)
	}
	if !(f.memFraction > 0 && f.memFraction <= 1) {
		bad("mem-fraction-static", "must be in (0, 1] (got %v)", f.memFraction)
	}
	if f.deviceMemoryGB < 0 || math.IsNaN(f.deviceMemoryGB) || math.IsInf(f.deviceMemoryGB, 0) {
		bad("device-memory-gb", "must be a finite number >= 0 (got %v)", f.deviceMemoryGB)
	}
	if f.maxTotalTokens < 0 {
		bad("max-total-tokens", "must be >= 0 (got %d)", f.maxTotalTokens)
	}
	if f.pageSize <= 0 || f.pageSize > 4096 {
		bad("page-size", "must be in [1, 4096] (got %d)", f.pageSize)
	}
	if f.maxTotalTokens > 0 && f.pageSize > 0 && f.maxTotalTokens < f.pageSize {
		bad("max-total-tokens", "%d is less than one page of --page-size %d tokens", f.maxTotalTokens, f.pageSize)
	}
	if f.cudaGraphMaxBS < 0 {
		bad("cuda-graph-max-bs", "must be >= 0 (got %d)", f.cudaGraphMaxBS)
	}
	if f.maxPrefillTokens <= 0 {
		bad("max-prefill-tokens", "must be > 0 (got %d)", f.maxPrefillTokens)
	}
	if f.shutdownGrace < 0 {
		bad("shutdown-grace", "must be >= 0 (got %s)", time.Duration(f.shutdownGrace))
	}
	switch engine.Semantics(f.semantics) {
	case engine.SemanticsStrict, engine.SemanticsSGLang:
	default:
		bad("semantics", "%q is unknown (strict, sglang)", f.semantics)
	}
	if f.decodeLogInterval < 0 {
		bad("decode-log-interval", "must be >= 0 (got %d)", f.decodeLogInterval)
	}
	if f.retryAfter < 0 {
		bad("retry-after", "must be >= 0 (got %s)", time.Duration(f.retryAfter))
	}
	if f.bootstrapPort < 0 || f.bootstrapPort > 65535 {
		bad("disaggregation-bootstrap-port", "must be in [0, 65535] (got %d)", f.bootstrapPort)
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		bad("log-level", "%v", err)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		bad("log-format", "%q is unknown (text, json)", f.logFormat)
	}
	if f.enableFaultInjection && f.faultToken == "" {
		bad("fault-injection-token", "is required with --enable-fault-injection")
	}
	if !f.enableFaultInjection && f.faultToken != "" {
		bad("fault-injection-token", "has no effect without --enable-fault-injection")
	}
	return errors.Join(errs...)
}

// kernelsConfig is the backend configuration of the flags; NumPages is set by the caller.
func (f *workerFlags) kernelsConfig() kernels.Config {
	kc := kernels.DefaultConfig()
	kc.Backend = f.backend
	kc.Model = f.modelName
	kc.Seed = f.seed
	kc.Profile = f.simProfile
	kc.PageSize = f.pageSize
	return kc
}

// engineConfig is the engine configuration of the flags for role.
func (f *workerFlags) engineConfig(role engine.Role) engine.Config {
	ec := engine.DefaultConfig()
	ec.Role = role
	ec.Semantics = engine.Semantics(f.semantics)
	ec.MaxQueuedRequests = f.maxQueued
	ec.MaxRunningRequests = f.maxRunning
	ec.ContextLength = f.contextLength
	ec.MemFractionStatic = f.memFraction
	ec.DeviceMemoryGB = f.deviceMemoryGB
	ec.MaxTotalTokens = f.maxTotalTokens
	ec.PageSize = f.pageSize
	ec.CudaGraphMaxBS = f.cudaGraphMaxBS
	ec.MaxPrefillTokens = f.maxPrefillTokens
	ec.DisableOverlapSchedule = f.disableOverlap
	ec.WatchdogTimeout = time.Duration(f.watchdog)
	ec.BootstrapTimeout = time.Duration(f.bootstrapTimeout)
	ec.PreallocTimeout = time.Duration(f.preallocTimeout)
	ec.TransferTimeout = time.Duration(f.transferTimeout)
	ec.WaitingTimeout = time.Duration(f.waitingTimeout)
	ec.RunningTimeout = time.Duration(f.runningTimeout)
	ec.RequestTimeout = time.Duration(f.requestTimeout)
	ec.DecodeLogInterval = f.decodeLogInterval
	ec.RetryAfter = time.Duration(f.retryAfter)
	return ec
}
