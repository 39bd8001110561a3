package scenarios

// Scenario is a decoded scenario file: what to run, against what, for how long, which
// faults to inject and what must hold. It is configuration, not the runtime object: the
// harness turns it into a Plan (see Plan) before anything runs.
//
// The YAML keys are part of the user-facing contract (issue 4); add fields, never rename.
type Scenario struct {
	// Name identifies the scenario in reports and in the default output directory.
	// Defaults to the file name without extension.
	Name string `yaml:"name" json:"name"`
	// Description is free text shown by `harness list`.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Seed seeds every random choice of the run (prompts, arrivals, jitter). Default 1.
	Seed int64 `yaml:"seed" json:"seed"`
	// Duration is how long load is generated. Default 30s.
	Duration Duration `yaml:"duration" json:"duration"`
	// Target is the endpoint under test; empty URL means the embedded reference server.
	Target Target `yaml:"target" json:"target"`
	// Reference configures the embedded reference PD topology (used when Target.URL is empty).
	Reference Reference `yaml:"reference" json:"reference"`
	// Workloads run concurrently, each in its own time window.
	Workloads []Workload `yaml:"workloads" json:"workloads"`
	// Deadlines bound every request.
	Deadlines Deadlines `yaml:"deadlines" json:"deadlines"`
	// Drain bounds the wait for in-flight requests and gauges after load stops.
	Drain Drain `yaml:"drain" json:"drain"`
	// Recovery parameterises the `recovery` assertion.
	Recovery Recovery `yaml:"recovery" json:"recovery"`
	// SelfCheck bounds the harness's own scheduling lag; beyond it the run is invalid.
	SelfCheck SelfCheck `yaml:"self_check" json:"self_check"`
	// Forensics says when the harness writes its evidence bundle (forensics/ in the
	// output directory): always at the first silent drop and at the end of a failed
	// run, and when the run is judged wedged if wedged_after is set.
	Forensics Forensics `yaml:"forensics" json:"forensics"`
	// Assertions are names (no_silent_drops, valid_responses, no_leaks, recovery) or
	// threshold expressions such as "p99(ttft) < 2s" or "rate(rejected) < 0.1".
	// Default: [no_silent_drops, valid_responses, explained_errors], plus no_leaks when metrics are known,
	// plus recovery when faults are present.
	Assertions []string `yaml:"assertions" json:"assertions"`
	// Faults are injected on the timeline, relative to the start of load. After
	// ApplyDefaults they are the concrete injections: a repeated timeline (FaultTimeline)
	// is expanded into one entry per cycle, named name, name#2, name#3, ...
	Faults []Fault `yaml:"faults" json:"faults"`
	// FaultTimeline says how the faults' timeline covers the scenario's duration: as
	// written (fixed), repeated in cycles, or scaled.
	FaultTimeline FaultTimeline `yaml:"fault_timeline" json:"-"` // the JSON (the scenario as run) holds the expanded Faults; expanding them again would repeat the repeats
	// Explore is the search space of `harness explore` (seed, load, server flags, fault
	// schedule); `harness run` ignores it.
	Explore *Explore `yaml:"explore,omitempty" json:"explore,omitempty"`

	// File is the path (or embedded name) the scenario was loaded from.
	File string `yaml:"-" json:"-"`
	// Env lists the environment variables the file referenced (${VAR}), as expanded.
	Env []EnvVar `yaml:"-" json:"-"`
	// pos maps field paths ("workloads[0].agents") to 1-based source lines.
	pos map[string]int
	// set records which field paths were present in the source (for defaults).
	set map[string]bool
	// anchored maps field paths whose value came from an anchor (&name, used by an
	// alias or a merge key) to where the anchor wrote it, for problem messages.
	anchored map[string]anchorRef
	// faultSpec is the fault list as written (before a repeated or scaled timeline is
	// expanded into Faults); validation reports against it, at the lines of the source.
	faultSpec []Fault
}

// Fault timeline cover modes.
const (
	CoverFixed  = "fixed"  // every fault once, at its `at`
	CoverRepeat = "repeat" // the faults again every period until the duration ends
	CoverScale  = "scale"  // at and for stretched (or shrunk) so that one period spans the duration
)

// FaultTimeline says how the faults' timeline covers the scenario's duration, so that a
// soak given a longer (or shorter) --duration keeps injecting faults throughout it.
type FaultTimeline struct {
	// Cover is fixed (default: every fault once, at its `at`), repeat (the list runs again
	// every period, named name#2, name#3, ...; an injection that would not end before the
	// end of load is left out) or scale (every at and for is multiplied by duration /
	// period, so that one cycle spans the whole duration).
	Cover string `yaml:"cover" json:"cover,omitempty"`
	// Period is the length of one cycle of the fault list. Default: the end of the last
	// fault (the largest at + for).
	Period Duration `yaml:"period" json:"period,omitempty"`
}

// Target is the endpoint under test.
type Target struct {
	// URL is the base URL of an OpenAI-compatible server (http://host:port). Empty: start
	// the embedded reference server (or the processes of Launch) and use its address.
	URL string `yaml:"url" json:"url,omitempty"`
	// Model is the model name sent in requests. Default "ref".
	Model string `yaml:"model" json:"model,omitempty"`
	// MetricsURL is a Prometheus endpoint; it enables no_leaks. For the embedded server it
	// defaults to the router's /metrics.
	MetricsURL string `yaml:"metrics_url" json:"metrics_url,omitempty"`
	// DebugURL is the server's /debug/requests endpoint, consulted when a silent drop is
	// noticed. Optional; defaults to <url>/debug/requests for the embedded server.
	DebugURL string `yaml:"debug_url" json:"debug_url,omitempty"`
	// MetricsURLs names more Prometheus endpoints, one per process of a deployment
	// (router, prefill-0, decode-0: name -> URL), scraped for samples and the leak
	// check, so decode's queues are watched even when the router does not export them.
	MetricsURLs map[string]string `yaml:"metrics_urls" json:"metrics_urls,omitempty"`
	// Launch lists external processes (SGLang, vLLM, ...) the harness starts, supervises
	// and stops; process faults apply to them by name.
	Launch []Launch `yaml:"launch" json:"launch,omitempty"`
	// Links are HTTP/TCP links of a launched topology the harness puts a fault proxy on
	// (router->prefill, router->decode, the bootstrap port). The proxies start before the
	// processes; a launch command names a proxy's address with {link:NAME} (host:port)
	// or {link-port:NAME} (the port), e.g. the router's --prefill http://{link:router->prefill}.
	// KV traffic over RDMA or NIXL cannot be proxied.
	Links []ProxyLink `yaml:"links" json:"links,omitempty"`
	// PDCounters names, per prefill process (a target.launch name, a metrics_urls key,
	// or prefill-N of the embedded server), the counter that rises once per prefill it
	// completes for a decode worker, e.g. {prefill: 'sglang:num_requests_total'} or
	// 'vllm:request_success_total{finished_reason="length"}'. The pd_path assertion
	// compares its rise with the requests completed ok. The embedded reference server
	// needs none (pdsoak:prefills_completed_total on every prefill worker).
	PDCounters map[string]string `yaml:"pd_counters" json:"pd_counters,omitempty"`
	// Headers are sent with every request to the target (Name: value): an Authorization
	// for an endpoint behind a gateway, a routing header. ${VAR} expands from the
	// environment, so Authorization: "Bearer ${API_KEY}" keeps the key out of the file.
	// Values are secrets: never written to any output (shown as <redacted>). --header
	// 'Name: value' adds or replaces one.
	Headers Headers `yaml:"headers" json:"headers,omitempty"`
	// TLS configures https:// targets.
	TLS *TLS `yaml:"tls" json:"tls,omitempty"`
	// IdleTimeout closes a pooled keep-alive connection idle this long instead of
	// reusing it. Default 4s: below uvicorn's 5 s (SGLang, vLLM), so the client is the
	// side that closes; set it below the server's own keep-alive timeout.
	IdleTimeout Duration `yaml:"idle_timeout" json:"idle_timeout,omitempty"`
}

// TLS configures the client for an https:// target.
type TLS struct {
	// CAFile is a PEM file of CA certificates that verify the server (default: the
	// system's roots). A relative path is relative to the working directory.
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`
	// InsecureSkipVerify turns certificate verification off (a test deployment only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`
	// ServerName is the name verified in the certificate and sent as SNI (default: the
	// URL's host).
	ServerName string `yaml:"server_name" json:"server_name,omitempty"`
}

// ProxyLink is one proxied link of a launched topology.
type ProxyLink struct {
	// Name is the fault target, "from->to" (router->prefill) or a plain name (bootstrap).
	Name string `yaml:"name" json:"name"`
	// Upstream is the host:port the proxy forwards to.
	Upstream string `yaml:"upstream" json:"upstream"`
}

// Launch is one external process of the target topology.
type Launch struct {
	// Name identifies the process in fault targets ("decode", "sglang-router").
	Name string `yaml:"name" json:"name"`
	// Role is router, prefill, decode or colocated.
	Role string `yaml:"role" json:"role"`
	// Launcher is a command line (split into words like a shell would, quotes kept
	// together) put before Command: `launcher: ${SGLANG_SERVER:-python3 -m
	// sglang.launch_server}` lets one environment variable swap the program.
	Launcher string `yaml:"launcher" json:"launcher,omitempty"`
	// Command is argv (after Launcher); without a launcher its first element is the program.
	Command []string `yaml:"command" json:"command"`
	// ExtraArgs are more arguments, split into words like Launcher and put after
	// Command: `extra_args: ${DECODE_EXTRA_ARGS:-}` lets a runner add flags to one role.
	ExtraArgs string `yaml:"extra_args" json:"extra_args,omitempty"`
	// HealthURL is polled until it answers 200 before load starts.
	HealthURL string `yaml:"health_url" json:"health_url,omitempty"`
	// Env holds extra environment variables (KEY: value).
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// StartTimeout bounds the wait for health. Default 120s.
	StartTimeout Duration `yaml:"start_timeout" json:"start_timeout,omitempty"`
	// MetricsURL is the process's Prometheus endpoint, scraped for samples and the leak
	// check (SGLang workers need --enable-metrics).
	MetricsURL string `yaml:"metrics_url" json:"metrics_url,omitempty"`
}

// Reference configures the embedded reference PD topology.
type Reference struct {
	// Prefill and Decode are the worker counts. Default 1 each. Both 0 means colocated.
	Prefill int `yaml:"prefill" json:"prefill"`
	Decode  int `yaml:"decode" json:"decode"`
	// Backend is tinyref, simtime or paced. Default tinyref.
	Backend string `yaml:"backend" json:"backend"`
	// Semantics is strict or sglang. Default strict.
	Semantics string `yaml:"semantics" json:"semantics"`
	// Profile names a simtime/paced timing profile (optional).
	Profile string `yaml:"profile" json:"profile,omitempty"`
	// Args are passed to every worker (prefill, decode, colocated); PrefillArgs and
	// DecodeArgs come after them. RouterArgs go to the router only.
	Args        []string `yaml:"args" json:"args,omitempty"`
	PrefillArgs []string `yaml:"prefill_args" json:"prefill_args,omitempty"`
	DecodeArgs  []string `yaml:"decode_args" json:"decode_args,omitempty"`
	RouterArgs  []string `yaml:"router_args" json:"router_args,omitempty"`
	// Proxies puts a TCP fault proxy on every link (router→prefill, router→decode,
	// prefill→decode KV). Default: true when a fault targets a link.
	Proxies bool `yaml:"proxies" json:"proxies"`
	// FaultInjection starts the workers with --enable-fault-injection. Default: true when
	// the scenario has faults.
	FaultInjection bool `yaml:"fault_injection" json:"fault_injection"`
	// StartTimeout bounds the wait for the topology to become healthy. Default 60s.
	StartTimeout Duration `yaml:"start_timeout" json:"start_timeout,omitempty"`
	// Netns runs router, prefill and decode each in its own network namespace, joined by
	// veth pairs on a bridge (as pdserver up --netns; root only, PD only).
	Netns bool `yaml:"netns" json:"netns,omitempty"`
	// NetnsPrefix names the namespaces and links of netns (default "pdharness", at most
	// 10 characters); leftovers of a crashed run with it are removed at start.
	NetnsPrefix string `yaml:"netns_prefix" json:"netns_prefix,omitempty"`
}

// Workload types.
const (
	WorkloadAgents   = "agents"
	WorkloadOpenLoop = "open_loop"
	WorkloadBurst    = "burst"
	// WorkloadProbe sends the same few greedy (temperature 0) prompts every interval;
	// the consistent_outputs assertion compares each probe's answers.
	WorkloadProbe = "probe"
)

// Endpoints.
const (
	EndpointChat        = "chat"        // /v1/chat/completions
	EndpointCompletions = "completions" // /v1/completions
)

// Pacer types (open_loop).
const (
	PacerConstant = "constant"
	PacerLinear   = "linear"
	PacerSine     = "sine"
	PacerPoisson  = "poisson"
)

// Workload is one source of load.
type Workload struct {
	// Name identifies the workload in events and fault targets. Default "<type>-<index>".
	Name string `yaml:"name" json:"name"`
	// Type is agents, open_loop, burst, probe or trace.
	Type string `yaml:"type" json:"type"`
	// Endpoint is chat (default) or completions.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Stream requests SSE streaming (default true).
	Stream bool `yaml:"stream" json:"stream"`
	// MaxTokens per request. Default 16.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens"`
	// Temperature for sampling; 0 (default) is greedy.
	Temperature float64 `yaml:"temperature" json:"temperature,omitempty"`
	// Headers are sent with this workload's requests, over target.headers (a routing
	// header that differs per cohort). Values are secrets, as target.headers'.
	Headers Headers `yaml:"headers" json:"headers,omitempty"`

	// Agents is the number of concurrent sessions (agents). Default 30.
	Agents int `yaml:"agents" json:"agents,omitempty"`
	// Turns per session (agents); 0 with a duration means until the window ends. Default 4.
	Turns int `yaml:"turns" json:"turns,omitempty"`
	// ToolResultBytes is the size of each simulated tool result appended per turn. Default 256.
	ToolResultBytes int `yaml:"tool_result_bytes" json:"tool_result_bytes,omitempty"`
	// ToolLatency is how long each simulated tool call takes. Default 0.
	ToolLatency Duration `yaml:"tool_latency" json:"tool_latency,omitempty"`
	// ThinkTime is a pause between turns. Default 0.
	ThinkTime Duration `yaml:"think_time" json:"think_time,omitempty"`
	// Retries is how many times an agent re-sends a turn that was explicitly refused
	// (429/503), after waiting Retry-After, each attempt a new request. Default 0: the
	// session moves on to its next turn. At most 100.
	Retries int `yaml:"retries" json:"retries,omitempty"`
	// Restart makes a session that finished its turns start a fresh conversation (new
	// task, turns counted from 1 again) until the window ends. Default false.
	Restart bool `yaml:"restart" json:"restart,omitempty"`

	// PromptTokens is the approximate prompt size (open_loop, burst, and the agents'
	// initial system prompt). Default 32.
	PromptTokens int `yaml:"prompt_tokens" json:"prompt_tokens,omitempty"`
	// Pacer sets the arrival rate (open_loop).
	Pacer *Pacer `yaml:"pacer" json:"pacer,omitempty"`
	// MaxInFlight caps concurrent requests of an open_loop workload (0: unbounded up to
	// the harness's limit). Hits the cap still holds when the window ends (plus 1 s) are
	// never sent; a note in the report says how many.
	MaxInFlight int `yaml:"max_in_flight" json:"max_in_flight,omitempty"`
	// Count is the number of requests (burst; also an optional cap for open_loop), or
	// of distinct probe prompts (probe, default 3).
	Count int `yaml:"count" json:"count,omitempty"`
	// Interval is the time between two rounds of probe prompts (probe). Default 1s.
	Interval Duration `yaml:"interval" json:"interval,omitempty"`
	// Trace is the trace a trace workload replays (file, format, speedup, rate, start, limit, max_tokens, block_tokens).
	Trace *Trace `yaml:"trace" json:"trace,omitempty"`

	// Start is the offset from the start of load. Default 0.
	Start Duration `yaml:"start" json:"start,omitempty"`
	// Duration is the window length; default: until the scenario's duration ends.
	Duration Duration `yaml:"duration" json:"duration,omitempty"`
}

// Pacer describes open-loop arrivals. Rates are requests per second.
type Pacer struct {
	// Type is constant, linear, sine or poisson.
	Type string `yaml:"type" json:"type"`
	// Rate is the (mean, or starting for linear) arrival rate in requests per second.
	Rate float64 `yaml:"rate" json:"rate"`
	// Slope is the rate increase per second (linear).
	Slope float64 `yaml:"slope" json:"slope,omitempty"`
	// Amplitude is the sine's amplitude in requests per second (sine).
	Amplitude float64 `yaml:"amplitude" json:"amplitude,omitempty"`
	// Period is the sine's period (sine).
	Period Duration `yaml:"period" json:"period,omitempty"`
}

// Deadlines bound every request. Defaults: connect 2s, first_token 10s, stall 5s, total 30s.
type Deadlines struct {
	// Connect bounds dialing and writing the request.
	Connect Duration `yaml:"connect" json:"connect"`
	// FirstToken bounds the time from sending to the first content token.
	FirstToken Duration `yaml:"first_token" json:"first_token"`
	// Stall bounds the silence between two chunks that carry progress (SSE comments and
	// keep-alives are not progress).
	Stall Duration `yaml:"stall" json:"stall"`
	// Total bounds the whole request.
	Total Duration `yaml:"total" json:"total"`
}

// Drain bounds what happens after load stops. Defaults: timeout = deadlines.total + 5s,
// leak_timeout 15s.
type Drain struct {
	// Timeout bounds the wait for in-flight requests to resolve.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// LeakTimeout bounds the wait for running/queued gauges to return to 0 (no_leaks).
	LeakTimeout Duration `yaml:"leak_timeout" json:"leak_timeout"`
}

// Recovery parameterises the recovery assertion: after each fault stops, the success
// rate over a sliding Window must return to at least Threshold within Within.
// Defaults: window 5s, threshold 0.9, within 30s.
type Recovery struct {
	Window    Duration `yaml:"window" json:"window"`
	Threshold float64  `yaml:"threshold" json:"threshold"`
	Within    Duration `yaml:"within" json:"within"`
}

// Forensics configures the evidence bundle (see harness/forensics).
type Forensics struct {
	// WedgedAfter judges the run wedged when requests are in flight and none completes
	// for this long (and, where NVML is available, the GPUs are idle); a bundle is
	// written then. 0 (the default): no wedge detection. At least 1s when set.
	WedgedAfter Duration `yaml:"wedged_after" json:"wedged_after,omitempty"`
	// Disabled turns every bundle off (benchmarks).
	Disabled bool `yaml:"disabled" json:"disabled,omitempty"`
}

// SelfCheck bounds the harness's own scheduling lag (how late it sends a request
// relative to its schedule). Beyond MaxLag at the p99, the run is invalid. Default 250ms.
type SelfCheck struct {
	MaxLag Duration `yaml:"max_lag" json:"max_lag"`
}

// Fault is one scheduled fault: applied at At (from the start of load), verified,
// reverted after For (0: held until the end of load).
type Fault struct {
	// Name identifies the fault in events. Default "<type>-<index>".
	Name string `yaml:"name" json:"name"`
	// Type is a fault type registered by the chaos package.
	Type string `yaml:"type" json:"type"`
	// Target is a process ("decode-0", "prefill", a target.launch name), a link
	// ("router->decode-0", "prefill-0->decode-0"), a workload name, or "client".
	Target string   `yaml:"target" json:"target"`
	At     Duration `yaml:"at" json:"at"`
	For    Duration `yaml:"for" json:"for"`
	// Params are type-specific; the chaos package interprets them.
	Params map[string]any `yaml:"params" json:"params,omitempty"`
}

// Explore modes for the fault schedule (explore.faults).
const (
	ExploreFaultsScenario  = "scenario"  // the scenario's own faults, re-timed
	ExploreFaultsCatalogue = "catalogue" // every fault type of the catalogue, on every target it accepts
	ExploreFaultsNone      = "none"      // no faults at all
)

// Explore is the search space of `harness explore`: every run draws the seed, and
// within the ranges given here the load, the reference server's flags and a fault
// schedule. A range is a list of two values [low, high], both included.
type Explore struct {
	// Duration is the range of the load duration, e.g. [10s, 60s]. Default: the
	// scenario's duration.
	Duration []Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	// Agents is the range of agents of every agents workload, each drawn on its own.
	Agents []int `yaml:"agents,omitempty" json:"agents,omitempty"`
	// Turns is the range of turns of every agents workload.
	Turns []int `yaml:"turns,omitempty" json:"turns,omitempty"`
	// Rate is the range of the pacer rate (requests per second) of every open_loop
	// workload; a sine pacer's amplitude is scaled with it.
	Rate []float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Flags are server flags to vary, by argument list (args: every worker, prefill,
	// decode, router) then flag name (--max-total-tokens) to a range [low, high]. Whole
	// bounds draw integers, bounds with a fraction draw numbers; a range whose high is at
	// least ten times its low (low > 0) is drawn log-uniformly. The value replaces the
	// flag in the scenario's reference.args, prefill_args, decode_args or router_args, or
	// is added as --flag=value.
	Flags map[string]map[string][]float64 `yaml:"flags,omitempty" json:"flags,omitempty"`
	// Faults says where the fault schedule comes from: scenario (default: the
	// scenario's own faults, each run a random subset at random times), catalogue (every
	// fault type of the catalogue, with its default params, on every target it accepts)
	// or none.
	Faults string `yaml:"faults,omitempty" json:"faults,omitempty"`
	// MaxFaults bounds the injections of one run (each run draws 0 to max_faults).
	// Default: the number of the scenario's faults (scenario), 3 (catalogue).
	MaxFaults int `yaml:"max_faults,omitempty" json:"max_faults,omitempty"`
	// FaultFor is the range of a fault's window. Default [1s, half the duration].
	FaultFor []Duration `yaml:"fault_for,omitempty" json:"fault_for,omitempty"`
}

// Line returns the 1-based source line of a field path such as "workloads[0].agents",
// or 0 when unknown (for example for a scenario built in Go).
func (sc *Scenario) Line(path string) int {
	if sc == nil || sc.pos == nil {
		return 0
	}
	return sc.pos[path]
}

// IsSet reports whether a field path was present in the source.
func (sc *Scenario) IsSet(path string) bool {
	return sc != nil && sc.set[path]
}
