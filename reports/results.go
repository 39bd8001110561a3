package reports

import (
	"encoding/json"
	"time"

	"pdsoak/ledger"
)

// Verdict is the overall result of a run.
type Verdict string

// Verdicts. The CLI maps them to exit codes: pass 0, fail 1, invalid 3.
const (
	VerdictPass    Verdict = "pass"
	VerdictFail    Verdict = "fail"    // an assertion failed
	VerdictInvalid Verdict = "invalid" // the run cannot be trusted (harness lag, unverified fault, infrastructure)
)

// Results is everything a report says about a run; results.json is its JSON form.
type Results struct {
	Verdict  Verdict `json:"verdict"`
	Scenario string  `json:"scenario"`
	Seed     int64   `json:"seed"`
	Target   string  `json:"target"`
	// Mode is "sim" for a simulated run (harness run --sim), absent for a real one.
	Mode  string    `json:"mode,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Duration is End - Start in seconds.
	Duration float64 `json:"duration"`
	// Requests counts terminal outcomes; Throughput is Requests per second of Duration.
	Requests   int     `json:"requests"`
	Throughput float64 `json:"throughput"`
	// Outcomes has every outcome of the taxonomy as a key.
	Outcomes map[ledger.Outcome]int `json:"outcomes"`
	// SilentDrops = stalled + deadline_exceeded.
	SilentDrops int `json:"silent_drops"`
	// Drops describes each silent drop (up to Config.MaxDrops).
	Drops []SilentDrop `json:"drops"`
	// DropStages counts, over the silent drops, where each server process held them
	// ("decode-0: prealloc"), from the /debug/requests answers in ServerDebug.
	DropStages map[string]int `json:"drop_stages,omitempty"`
	// Unexplained lists the requests whose error nothing explains (cause
	// "unexplained"), with their trace ids (up to Config.MaxDrops).
	Unexplained []UnexplainedError `json:"unexplained,omitempty"`
	// Causes counts the non-ok outcomes by what explains them ("fault:kill", "refused",
	// "client", "unexplained"); UnexplainedErrors is how many explicit errors (see
	// ErrorCounted) nothing explains: what explained_errors judges.
	Causes            map[string]int `json:"causes,omitempty"`
	UnexplainedErrors int            `json:"unexplained_errors"`
	// Liveness lists every outage of the target or a launched process the harness's
	// health probes saw, and the fault that explains it.
	Liveness []LivenessResult `json:"liveness,omitempty"`
	// NoFirstToken counts the requests that ended (not ok) without a first token: what
	// a TTFT percentile, computed over the others, cannot show.
	NoFirstToken int `json:"no_first_token,omitempty"`
	// DropRoots counts the silent drops by the stage where each stopped progressing
	// first ("decode-0: prealloc"), the other processes' stages only waiting on it;
	// DropDiagnosis says the most common in one sentence.
	DropRoots     map[string]int `json:"drop_roots,omitempty"`
	DropDiagnosis string         `json:"drop_diagnosis,omitempty"`
	// Unresolved counts requests scheduled with no terminal outcome in the ledger.
	Unresolved int `json:"unresolved"`
	// ConnRetries counts the requests the client re-sent once on a fresh connection
	// because a reused one ended before any byte of the answer (done events' conn_retry):
	// the idle keep-alive race, or a server that read the request and then lost the
	// connection, which then saw it twice. A note says so when there are any.
	ConnRetries int               `json:"conn_retries,omitempty"`
	Assertions  []AssertionResult `json:"assertions"`
	TTFT        Percentiles       `json:"ttft"`
	ITL         Percentiles       `json:"itl"`
	E2E         Percentiles       `json:"e2e"`
	Lag         Percentiles       `json:"harness_lag"`
	Faults      []FaultResult     `json:"faults"`
	Workloads   map[string]int    `json:"workloads,omitempty"`
	// Arrivals are the replayed schedules against what was sent (Config.ArrivalWorkloads).
	Arrivals []ArrivalCurve `json:"arrivals,omitempty"`
	// ByWorkload breaks outcomes and latency down per workload (Workloads keeps the
	// request counts it always had).
	ByWorkload map[string]WorkloadResult `json:"by_workload,omitempty"`
	Leak       *CheckResult              `json:"leak_check,omitempty"`
	SelfCheck  *CheckResult              `json:"self_check,omitempty"`
	// GPU summarises the GPU samples; absent when the ledger has none.
	GPU *GPUResult `json:"gpu,omitempty"`
	// PDPath is the share of ok requests that went through a prefill worker, overall and
	// per window (pdpath.go); nil when no prefill counter was scraped.
	PDPath *PDPathResult `json:"pd_path,omitempty"`
	// HealthLies are the windows where the entry's /health said 200 while every request
	// sent then failed (health.go).
	HealthLies []HealthLie `json:"health_lies,omitempty"`
	// InvalidReasons says why the verdict is invalid.
	InvalidReasons []string `json:"invalid_reasons,omitempty"`
	// Notes are the ledger's note events (what the CLI and the harness told the reader)
	// and the report's own remarks, in ledger order.
	Notes []string `json:"notes,omitempty"`
	// Shard is set when the ledger is one shard of a sharded run, or their merge: which
	// shards, and how far apart (skew, seconds) they started.
	Shard *ledger.Shard `json:"shard,omitempty"`
	// Forensics are the forensics bundles the harness wrote (its note events with Source
	// "forensics"); their notes are in Notes too.
	Forensics []ForensicsBundle `json:"forensics,omitempty"`
	// Provenance is where and how the run was made; absent when the ledger says nothing.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Contention is how busy the harness's machine was during the load (contention
	// samples; absent when the run recorded none, as a simulated run).
	Contention *ContentionResult `json:"contention,omitempty"`

	// timeline is the figures behind report.html, attached by Compute and ComputeFile.
	timeline *Timeline
}

// Timeline returns the figures behind report.html's charts when the Results were computed
// from a ledger by Compute or ComputeFile (nil otherwise).
func (r *Results) Timeline() *Timeline { return r.timeline }

// ForensicsBundle is one forensics bundle: Dir is its directory relative to the run's
// output directory (it holds MANIFEST.json), Note the harness's markdown note about it.
type ForensicsBundle struct {
	Dir  string `json:"dir"`
	Note string `json:"note"`
}

// Provenance is run_start's provenance plus what the target said about itself.
type Provenance struct {
	ledger.Provenance
	// ServerVersion and Models come from the target event: the server's version where
	// it offers one and its raw /v1/models answer.
	ServerVersion string          `json:"server_version,omitempty"`
	Models        json.RawMessage `json:"models,omitempty"`
}

// State is the outcome of one assertion or check.
type State string

// States. A listed assertion that could not be evaluated is never a pass: it makes the
// run invalid.
const (
	StatePass         State = "pass"
	StateFail         State = "fail"
	StateNotEvaluated State = "not_evaluated"
)

// Percentiles of a latency in seconds.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// WorkloadResult is one workload's outcomes and latency.
type WorkloadResult struct {
	Requests    int                    `json:"requests"`
	Outcomes    map[ledger.Outcome]int `json:"outcomes"`
	SilentDrops int                    `json:"silent_drops"`
	TTFT        Percentiles            `json:"ttft"`
	ITL         Percentiles            `json:"itl"`
	E2E         Percentiles            `json:"e2e"`
	// Causes counts the workload's non-ok outcomes by cause (see Results.Causes).
	Causes map[string]int `json:"causes,omitempty"`
}

// SilentDrop is one request that ended stalled or deadline_exceeded.
type SilentDrop struct {
	RequestID string         `json:"request_id"`
	Workload  string         `json:"workload,omitempty"`
	Session   int            `json:"session,omitempty"`
	Turn      int            `json:"turn,omitempty"`
	Outcome   ledger.Outcome `json:"outcome"`
	Phase     ledger.Phase   `json:"phase,omitempty"`
	// Age is how long the request had been outstanding when classified (seconds).
	Age float64 `json:"age"`
	// At is the offset from the start of the run when it was classified (seconds).
	At float64 `json:"at"`
	// ServerDebug is what the server's /debug/requests said about it, if anything.
	ServerDebug json.RawMessage `json:"server_debug,omitempty"`
	// TraceID is the W3C trace id the request carried (its traceparent), to find it in
	// the server's traces.
	TraceID string `json:"trace_id,omitempty"`
}

// AssertionResult is one assertion's outcome; junit.xml has one test case per result.
// Passed is State == StatePass; Detail says why (for not_evaluated: why it could not be).
type AssertionResult struct {
	Name   string `json:"name"`
	State  State  `json:"state"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// FaultResult is one injected fault. Offsets are seconds from the start of the run.
type FaultResult struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Target   string   `json:"target"`
	Start    float64  `json:"start"`
	Stop     *float64 `json:"stop,omitempty"`
	Verified *bool    `json:"verified,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	// Recovered says whether the success rate came back above the threshold within the
	// bound; nil when it could not be measured (no requests after the fault stopped).
	Recovered *bool `json:"recovered,omitempty"`
	// TimeToRecover is seconds from the fault's stop to the start of the first window
	// whose success rate reached the threshold.
	TimeToRecover *float64 `json:"time_to_recover,omitempty"`
}

// CheckResult is the outcome of a check the harness ran (leak check, self-check). A
// check the harness could not complete is StateNotEvaluated with the reason in Detail.
type CheckResult struct {
	State   State              `json:"state"`
	Passed  bool               `json:"passed"`
	Detail  string             `json:"detail,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Config says how to judge a ledger.
type Config struct {
	// Scenario, Seed and Target are used when the ledger has no run_start event.
	Scenario string
	Seed     int64
	Target   string
	// Assertions to evaluate (built-in names or threshold expressions). Nil: no_silent_drops
	// and valid_responses.
	Assertions []string
	// Recovery parameterises the recovery assertion (zero fields take the defaults).
	Recovery RecoveryConfig
	// MaxDrops bounds the per-drop details kept (default 1000).
	MaxDrops int
	// CauseMargin is how long after a fault stops it may still explain a request that
	// began then (default DefaultCauseMargin).
	CauseMargin time.Duration
	// ArrivalWorkloads name the workloads (trace replays) whose arrival curve, scheduled
	// against sent, goes into Results.Arrivals.
	ArrivalWorkloads []string
	// InProgress: the run is judging its own ledger before writing run_end (forensics),
	// so a ledger without run_end is not a run cut short.
	InProgress bool
}

// WhileRunning is c for a ledger still being written (InProgress).
func (c Config) WhileRunning() Config {
	c.InProgress = true
	return c
}

// RecoveryConfig: after a fault stops, the success rate (ok / all) of requests scheduled
// in some window [t, t+Window) with t - stop ≤ Within must reach Threshold, over at least
// MinRequests requests (fewer if fewer were sent after the stop).
type RecoveryConfig struct {
	Window      time.Duration
	Within      time.Duration
	Threshold   float64
	MinRequests int
}

// Recovery defaults.
const (
	DefaultRecoveryWindow      = 5 * time.Second
	DefaultRecoveryWithin      = 30 * time.Second
	DefaultRecoveryThreshold   = 0.9
	DefaultRecoveryMinRequests = 3
	DefaultMaxDrops            = 1000
)

// Passed reports whether every assertion passed.
func (r *Results) Passed() bool {
	for _, a := range r.Assertions {
		if a.State != StatePass {
			return false
		}
	}
	return true
}

// Failed lists the assertions that failed.
func (r *Results) Failed() []string {
	var out []string
	for _, a := range r.Assertions {
		if a.State == StateFail {
			out = append(out, a.Name)
		}
	}
	return out
}

func newState(passed bool) State {
	if passed {
		return StatePass
	}
	return StateFail
}
