package ledger

import (
	"encoding/json"
	"time"
)

// Outcome is the terminal classification of one request. Every request ends in exactly
// one outcome (see DESIGN.md, "Outcomes").
type Outcome string

// The outcome taxonomy.
const (
	OutcomeOK               Outcome = "ok"                // complete response with a terminal marker
	OutcomeRejected         Outcome = "rejected"          // 429 or 503: explicit refusal
	OutcomeHTTPError        Outcome = "http_error"        // any other error status
	OutcomeStreamError      Outcome = "stream_error"      // an error event inside the stream
	OutcomeTransportError   Outcome = "transport_error"   // refused or reset before any response
	OutcomeTruncated        Outcome = "truncated"         // ended cleanly without [DONE]/finish_reason, or short body
	OutcomeConnectionLost   Outcome = "connection_lost"   // EOF or reset mid-response, no clean end
	OutcomeInvalid          Outcome = "invalid"           // success status, unparseable body
	OutcomeStalled          Outcome = "stalled"           // silent longer than the stall deadline
	OutcomeDeadlineExceeded Outcome = "deadline_exceeded" // no terminal outcome by the total deadline
	OutcomeCancelled        Outcome = "cancelled"         // the harness cancelled it on purpose
	// OutcomeUnresolved: still in flight, within its deadline, when the run was
	// interrupted (SIGINT/SIGTERM); a request already overdue then is a silent drop.
	OutcomeUnresolved Outcome = "unresolved_at_interrupt"
)

// Outcomes lists the whole taxonomy in report order.
var Outcomes = []Outcome{
	OutcomeOK, OutcomeRejected, OutcomeHTTPError, OutcomeStreamError, OutcomeTransportError,
	OutcomeConnectionLost, OutcomeTruncated, OutcomeInvalid, OutcomeStalled, OutcomeDeadlineExceeded,
	OutcomeCancelled, OutcomeUnresolved,
}

// Cause says what explains a non-ok outcome (done events; empty on ok). An error is
// acceptable only when something explains it: a declared fault that acted on what served
// the request ("fault:<name>"), an explicit load-shedding refusal, or the client's own
// doing. CauseUnexplained fails the explained_errors assertion.
const (
	CauseRefused     = "refused"     // an explicit 429/503 load-shedding answer
	CauseClient      = "client"      // the scenario's own cancellation or client_disconnect fault
	CauseUnexplained = "unexplained" // nothing declared explains it
	// CauseFaultPrefix + fault name: the request met a declared fault that acted on a
	// process or link serving it.
	CauseFaultPrefix = "fault:"
)

// ProofCutAtStop is a failed fault_verified event's Detail when the run stopped (its
// load ended, or it was interrupted) while the fault's proof was still pending: in an
// interrupted run, the interrupt is what left it unproved.
const ProofCutAtStop = "no proof before the run ended"

// Valid reports whether o is part of the taxonomy.
func (o Outcome) Valid() bool {
	for _, k := range Outcomes {
		if k == o {
			return true
		}
	}
	return false
}

// SilentDrop reports whether o counts as a silent drop (stalled or deadline_exceeded).
func (o Outcome) SilentDrop() bool {
	return o == OutcomeStalled || o == OutcomeDeadlineExceeded
}

// Phase is where a request was when it stalled or ran out of time.
type Phase string

// Phases.
const (
	PhaseConnect          Phase = "connect"            // dialing / writing the request
	PhaseBeforeHeaders    Phase = "before_headers"     // sent, no response headers yet
	PhaseBeforeFirstToken Phase = "before_first_token" // headers received, no content token yet
	PhaseMidStream        Phase = "mid_stream"         // at least one token received
)

// EventType is the kind of a ledger line.
type EventType string

// ModeSim is run_start's Mode of a simulated run.
const ModeSim = "sim"

// Event types.
const (
	EventRunStart      EventType = "run_start"      // Scenario, Seed, Target, Mode
	EventRunEnd        EventType = "run_end"        // Error set when the run failed
	EventScheduled     EventType = "scheduled"      // a request's intended send time (Time)
	EventSent          EventType = "sent"           // request written (Lag = sent - scheduled)
	EventHeaders       EventType = "headers"        // response headers received (Status)
	EventFirstToken    EventType = "first_token"    // first content token (TTFT)
	EventDone          EventType = "done"           // terminal: Outcome, Phase, TTFT/ITL/E2E...
	EventFaultStart    EventType = "fault_start"    // Fault, FaultType, Target
	EventFaultStop     EventType = "fault_stop"     // Fault reverted
	EventFaultVerified EventType = "fault_verified" // Passed: whether the fault took effect
	EventSample        EventType = "sample"         // server gauges scraped (Metrics) or GPU readings (GPUs)
	EventDrain         EventType = "drain"          // drain finished (InFlight left, Passed)
	EventLeakCheck     EventType = "leak_check"     // Passed, Metrics (residual gauges)
	EventSelfCheck     EventType = "self_check"     // Passed, LagP99, LagMax
	EventLog           EventType = "log"            // free-form diagnostic line (Message)
	EventNote          EventType = "note"           // a note for the reader of the report (Message); reports lists them
	EventTarget        EventType = "target"         // what the target says about itself: Models, ServerVersion
	EventTargetDown    EventType = "target_down"    // a liveness probe of Source (a process or the target) failed
	EventTargetUp      EventType = "target_up"      // Source answers its liveness probe again
)

// Event is one line of events.jsonl. Only the fields relevant to Type are set.
// Durations are in seconds. Sessions and turns are 1-based (0: not applicable).
type Event struct {
	Time time.Time `json:"time"`
	Type EventType `json:"type"`

	// Request fields.
	RequestID string `json:"request_id,omitempty"`
	Workload  string `json:"workload,omitempty"`
	Session   int    `json:"session,omitempty"`
	Turn      int    `json:"turn,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
	// Scheduled is the intended send time (on sent and done events), so latencies can be
	// measured from the schedule rather than from the actual send (coordinated omission).
	Scheduled    *time.Time `json:"scheduled,omitempty"`
	PromptTokens int        `json:"prompt_tokens,omitempty"`
	PromptBytes  int        `json:"prompt_bytes,omitempty"`

	// Terminal fields (done).
	Outcome Outcome `json:"outcome,omitempty"`
	// Cause explains a non-ok outcome: see the Cause constants.
	Cause  string `json:"cause,omitempty"`
	Phase  Phase  `json:"phase,omitempty"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// TTFT is first content token minus sent; E2E is done minus sent (seconds).
	TTFT float64 `json:"ttft,omitempty"`
	E2E  float64 `json:"e2e,omitempty"`
	// ITL holds the inter-token (inter-chunk) gaps of the request in seconds.
	ITL []float64 `json:"itl,omitempty"`
	// Age is how long the request had been outstanding when it was classified (seconds);
	// set for silent drops.
	Age              float64 `json:"age,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
	Chunks           int     `json:"chunks,omitempty"`
	Bytes            int64   `json:"bytes,omitempty"`
	FinishReason     string  `json:"finish_reason,omitempty"`
	// Probe names the probe prompt a request sent (probe workloads only), and Text is the
	// text its answer carried: what consistent_outputs compares.
	Probe string `json:"probe,omitempty"`
	Text  string `json:"text,omitempty"`
	// ConnRetry (done) counts the times the request was re-sent on a fresh connection
	// after a reused keep-alive connection was closed under it before any response byte
	// (the idle keep-alive race); visible, never silent.
	ConnRetry int `json:"conn_retry,omitempty"`
	// TraceID is the W3C trace id the request carried in its traceparent header (32 hex
	// digits), so the request can be found in the server's traces.
	TraceID string `json:"trace_id,omitempty"`
	// Lag is the harness's own scheduling lag (sent - scheduled) in seconds (sent events).
	Lag float64 `json:"lag,omitempty"`
	// ServerDebug is what the target's /debug/requests said about this request when the
	// harness noticed the drop (raw JSON, absent when the target has no such endpoint).
	ServerDebug json.RawMessage `json:"server_debug,omitempty"`

	// Fault fields.
	Fault     string         `json:"fault,omitempty"`
	FaultType string         `json:"fault_type,omitempty"`
	Target    string         `json:"target,omitempty"`
	Params    map[string]any `json:"params,omitempty"`

	// Check fields (fault_verified, drain, leak_check, self_check).
	Passed *bool  `json:"passed,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Started (leak_check) is when the check began polling the gauges: in a merged run
	// reports needs it to know whether another shard still had requests in flight.
	Started *time.Time `json:"started,omitempty"`
	// Part (drain, leak_check, self_check in a merged ledger) is the shard that wrote the
	// event; the merge sets it, since these events carry no request id to tell by.
	Part int `json:"part,omitempty"`

	// Sample fields (sample, leak_check): gauge name -> value.
	Source  string             `json:"source,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// GPUs holds one reading per device in a GPU sample (Source "gpu", see
	// harness/gpu); such a sample also carries the harness's InFlight count.
	GPUs []GPU `json:"gpus,omitempty"`

	// Drain / self-check fields.
	InFlight int     `json:"in_flight,omitempty"`
	LagP99   float64 `json:"lag_p99,omitempty"`
	LagMax   float64 `json:"lag_max,omitempty"`

	// Run fields (run_start).
	Scenario   string      `json:"scenario,omitempty"`
	Seed       int64       `json:"seed,omitempty"`
	URL        string      `json:"url,omitempty"`
	Provenance *Provenance `json:"provenance,omitempty"`
	// Interrupted (run_end) is the cause when a signal or a cancelled context cut the
	// run short; reports makes such a run invalid.
	Interrupted string `json:"interrupted,omitempty"`
	// Mode (run_start) is "sim" for a simulated run (`harness run --sim`: virtual time,
	// simulated topology); empty for a real one.
	Mode string `json:"mode,omitempty"`
	// Shard (run_start) says the run is one shard of a sharded run, or the merge of one.
	Shard *Shard `json:"shard,omitempty"`

	// Target fields (target): the raw /v1/models answer and the server's version where
	// it offers one.
	Models        json.RawMessage `json:"models,omitempty"`
	ServerVersion string          `json:"server_version,omitempty"`

	Message string `json:"message,omitempty"`
}

// Provenance is where and how a run was made (run_start), for results.json.
type Provenance struct {
	HarnessVersion string   `json:"harness_version,omitempty"` // module version
	Revision       string   `json:"revision,omitempty"`        // VCS revision (+dirty)
	GoVersion      string   `json:"go_version,omitempty"`
	Host           string   `json:"host,omitempty"`
	OS             string   `json:"os,omitempty"`   // GOOS/GOARCH
	CPU            string   `json:"cpu,omitempty"`  // model name and count
	GPUs           []string `json:"gpus,omitempty"` // device names, when NVML finds any
	CommandLine    []string `json:"command_line,omitempty"`
}

// Bool returns a pointer to b, for Event.Passed.
func Bool(b bool) *bool { return &b }

// GPUSource is the Source of a sample event that carries GPU readings.
const GPUSource = "gpu"

// GPU is one device's reading in a GPU sample event. A field the driver could not read
// is absent and the reason is in Errors; zero is a real reading (an idle GPU).
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	// Util is the percent of the driver's last sample period in which a kernel ran;
	// MemUtil the percent in which device memory was read or written.
	Util    *float64 `json:"util,omitempty"`
	MemUtil *float64 `json:"mem_util,omitempty"`
	// MemUsed and MemTotal are device memory in bytes.
	MemUsed  *uint64 `json:"mem_used,omitempty"`
	MemTotal *uint64 `json:"mem_total,omitempty"`
	// PowerW is board power in watts; TempC the GPU core temperature in °C.
	PowerW *float64 `json:"power_w,omitempty"`
	TempC  *float64 `json:"temp_c,omitempty"`
	// Errors says which reads failed ("power: ERROR_NOT_SUPPORTED").
	Errors []string `json:"errors,omitempty"`
}
