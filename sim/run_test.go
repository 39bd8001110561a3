package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/harness/judge"
	"pdsoak/harness/workload"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

func parse(t testing.TB, yaml string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(yaml), scenarios.WithFaultTypes(chaos.FaultTypes()))
	require.NoError(t, err)
	return sc
}

// simulate runs sc against a fake with plan (tweaked) and returns the ledger's events,
// its bytes and the fake.
func simulate(t testing.TB, sc *scenarios.Scenario, plan func(string) behaviour, tweak ...func(*fakeServer)) ([]ledger.Event, []byte, *fakeServer, error) {
	t.Helper()
	var fake *fakeServer
	evs, b, err := simulateWith(t, sc, func(l *Loop) Server {
		fake = newFake(l, plan)
		for _, f := range tweak {
			f(fake)
		}
		return fake
	})
	return evs, b, fake, err
}

// simulateWith runs sc against the Server mk builds.
func simulateWith(t testing.TB, sc *scenarios.Scenario, mk func(*Loop) Server) ([]ledger.Event, []byte, error) {
	t.Helper()
	dir := t.TempDir()
	err := Run(context.Background(), sc, Options{OutDir: dir,
		NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) { return mk(l), nil }})
	b, rerr := os.ReadFile(filepath.Join(dir, ledger.EventsFile))
	if rerr != nil {
		return nil, nil, err
	}
	evs, _, rerr := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, rerr)
	return evs, b, err
}

func doneByID(evs []ledger.Event) map[string]ledger.Event {
	m := map[string]ledger.Event{}
	for _, e := range evs {
		if e.Type == ledger.EventDone {
			m[e.RequestID] = e
		}
	}
	return m
}

func ofType(evs []ledger.Event, typ ledger.EventType) []ledger.Event {
	var out []ledger.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

const agentsYAML = `
name: sim-agents
seed: 7
duration: 20s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: agents, type: agents, agents: 7, turns: 2, max_tokens: 4, retries: 1, tool_latency: 100ms, think_time: 200ms}
deadlines: {connect: 2s, first_token: 3s, stall: 1s, total: 5s}
assertions: [no_silent_drops, no_leaks]
`

func TestAgentsOutcomes(t *testing.T) {
	overload := &gen.OverloadError{RetryAfter: 1500 * time.Millisecond, Reason: "queue full"}
	plan := planBy(map[string]behaviour{
		// Refused once with Retry-After 2s (1.5s rounded up), then the retry succeeds.
		"agents-s002-t001":    {refuse: overload},
		"agents-s002-t001-r1": okBehaviour(),
		// Accepted, never a word: the first-token deadline, before the headers.
		"agents-s003-t001": {hangAfter: 0, failAfter: -1},
		// Two tokens, then silence: stalled mid-stream.
		"agents-s004-t001": {tokens: 4, hangAfter: 2, failAfter: -1},
		// An error after a token: an error event in the stream.
		"agents-s005-t001": {tokens: 4, hangAfter: -1, failAfter: 1, failErr: &gen.StageError{Stage: "transfer", Err: gen.ErrTransfer}},
		// An error before any event: the error status (504).
		"agents-s005-t002": {tokens: 4, hangAfter: -1, failAfter: 0, failErr: &gen.StageError{Stage: "total", Err: gen.ErrTimeout}},
		// Slow tokens past the total deadline: deadline_exceeded mid-stream.
		"agents-s006-t001": {tokens: 100, gap: 900 * time.Millisecond, hangAfter: -1, failAfter: -1},
		// Invalid request: a 400 http_error.
		"agents-s007-t002": {refuse: gen.ErrContextLength},
	})
	evs, _, fake, err := simulate(t, parse(t, agentsYAML), plan)
	require.NoError(t, err)
	done := doneByID(evs)

	tests := []struct {
		id      string
		outcome ledger.Outcome
		phase   ledger.Phase
		status  int
	}{
		{"agents-s001-t001", ledger.OutcomeOK, "", 200},
		{"agents-s001-t002", ledger.OutcomeOK, "", 200},
		{"agents-s002-t001", ledger.OutcomeRejected, "", 503},
		{"agents-s002-t001-r1", ledger.OutcomeOK, "", 200},
		{"agents-s002-t002", ledger.OutcomeOK, "", 200},
		{"agents-s003-t001", ledger.OutcomeDeadlineExceeded, ledger.PhaseBeforeHeaders, 0},
		{"agents-s004-t001", ledger.OutcomeStalled, ledger.PhaseMidStream, 200},
		{"agents-s005-t001", ledger.OutcomeStreamError, "", 200},
		{"agents-s005-t002", ledger.OutcomeHTTPError, "", 504},
		{"agents-s006-t001", ledger.OutcomeDeadlineExceeded, ledger.PhaseMidStream, 200},
		{"agents-s007-t002", ledger.OutcomeHTTPError, "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			e, ok := done[tt.id]
			require.True(t, ok, "no done event for %s", tt.id)
			assert.Equal(t, tt.outcome, e.Outcome, e.Error)
			assert.Equal(t, tt.phase, e.Phase)
			assert.Equal(t, tt.status, e.Status)
		})
	}
	assert.Len(t, done, 15, "7 sessions x 2 turns + 1 retry")

	// Timing on the virtual clock: the retry waited Retry-After (2s) after the refusal.
	rej, retry := done["agents-s002-t001"], done["agents-s002-t001-r1"]
	assert.Equal(t, 2*time.Second, retry.Scheduled.Sub(rej.Time))
	// The first-token deadline fired 3s after the send, the stall 1s after the 2nd token.
	assert.Equal(t, 3*time.Second, done["agents-s003-t001"].Time.Sub(*done["agents-s003-t001"].Scheduled))
	assert.InDelta(t, 3.0, done["agents-s003-t001"].Age, 1e-9)
	assert.Equal(t, 1010*time.Millisecond, done["agents-s004-t001"].Time.Sub(*done["agents-s004-t001"].Scheduled))
	assert.Equal(t, 5*time.Second, done["agents-s006-t001"].Time.Sub(*done["agents-s006-t001"].Scheduled))
	ok := done["agents-s001-t001"]
	assert.Equal(t, 4, ok.CompletionTokens)
	assert.Equal(t, 4, ok.Chunks)
	assert.Equal(t, "length", ok.FinishReason)
	assert.InDelta(t, 0.0, ok.TTFT, 1e-9, "the fake's first token comes at once")
	assert.Equal(t, []float64{0.01, 0.01, 0.01}, ok.ITL)
	assert.Positive(t, ok.Bytes)
	assert.Contains(t, done["agents-s005-t001"].Error, "client: error event: transfer: kv transfer failed")
	assert.Equal(t, "client: status 503: overloaded: queue full (retry after 1.5s)", rej.Error)

	// Silent drops carry what /debug/requests said, in the real runner's shape.
	var rep judge.DebugReport
	require.NoError(t, json.Unmarshal(done["agents-s004-t001"].ServerDebug, &rep))
	assert.Equal(t, "router: relay for 0.0s (age 1.0s); decode-0: hung for 0.0s (age 1.0s)", rep.Where)
	require.Len(t, rep.Sources, 2)
	assert.Equal(t, "router", rep.Sources[0].Process)
	assert.True(t, rep.Sources[1].Found)
	assert.Empty(t, done["agents-s001-t001"].ServerDebug)

	// A deadline closes the connection: the server let the request go (gauges at 0).
	assert.Empty(t, fake.reqs)
	leak := ofType(evs, ledger.EventLeakCheck)
	require.Len(t, leak, 1)
	require.NotNil(t, leak[0].Passed)
	assert.True(t, *leak[0].Passed, leak[0].Detail)

	// The second turn carries the first turn's answer: the fake's tokens "abcd".
	for _, e := range evs {
		if e.Type == ledger.EventScheduled && e.RequestID == "agents-s001-t002" {
			assert.Greater(t, e.PromptBytes, ofPromptBytes(evs, "agents-s001-t001"))
		}
	}
	assert.Len(t, fake.submitted, 15, "every request reached the server (the refusals are the server's)")
}

func ofPromptBytes(evs []ledger.Event, id string) int {
	for _, e := range evs {
		if e.Type == ledger.EventScheduled && e.RequestID == id {
			return e.PromptBytes
		}
	}
	return -1
}

func TestOpenLoopScheduleMatchesWorkload(t *testing.T) {
	sc := parse(t, `
name: sim-open
seed: 3
duration: 10s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: poisson, rate: 5}, endpoint: completions, stream: false, max_tokens: 3}
  - {name: spike, type: burst, count: 12, start: 4s}
assertions: [no_silent_drops]
`)
	evs, _, _, err := simulate(t, sc, nil)
	require.NoError(t, err)

	// The schedule a real run's attacker replays.
	sc2 := parse(t, `
name: sim-open
seed: 3
duration: 10s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: poisson, rate: 5}, endpoint: completions, stream: false, max_tokens: 3}
assertions: [no_silent_drops]
`)
	sc2.ApplyDefaults()
	w, err := workload.New(sc2, 0)
	require.NoError(t, err)
	o := w.(*workload.OpenLoop)
	want := workload.Schedule(o.Pacer, o.Spec.Duration.D(), o.Spec.Count)
	require.NotEmpty(t, want)

	var got []time.Duration
	var ids []string
	burst := 0
	for _, e := range ofType(evs, ledger.EventScheduled) {
		switch e.Workload {
		case "steady":
			got = append(got, e.Time.Sub(Epoch))
			ids = append(ids, e.RequestID)
		case "spike":
			burst++
			assert.Equal(t, 4*time.Second, e.Time.Sub(Epoch), e.RequestID)
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "steady-000000", ids[0])
	assert.Equal(t, 12, burst)
	for id, e := range doneByID(evs) {
		assert.Equal(t, ledger.OutcomeOK, e.Outcome, id)
		if e.Workload == "steady" {
			assert.Equal(t, "completions", e.Endpoint)
			assert.Equal(t, 1, e.Chunks, "a whole body")
		}
	}
	assert.Len(t, doneByID(evs), len(want)+12)
}

func TestDrainCancelsWhatOutlivesItsBound(t *testing.T) {
	sc := parse(t, `
name: sim-drain
duration: 2s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: b, type: burst, count: 3}
deadlines: {first_token: 20s, stall: 20s, total: 30s}
drain: {timeout: 4s, leak_timeout: 2s}
assertions: [no_silent_drops]
`)
	hang := behaviour{hangAfter: 0, failAfter: -1}
	evs, _, _, err := simulate(t, sc, planBy(map[string]behaviour{"b-000001": hang}))
	require.NoError(t, err)
	done := doneByID(evs)
	assert.Equal(t, ledger.OutcomeOK, done["b-000000"].Outcome)
	c := done["b-000001"]
	assert.Equal(t, ledger.OutcomeCancelled, c.Outcome)
	assert.Equal(t, ledger.PhaseBeforeHeaders, c.Phase)
	drain := ofType(evs, ledger.EventDrain)
	require.Len(t, drain, 1)
	assert.False(t, *drain[0].Passed)
	assert.Equal(t, 1, drain[0].InFlight)
	assert.Equal(t, "1 requests still in flight after 4s; cancelled", drain[0].Detail)
	// The load ended when the burst's other requests were done (no faults), the drain 4s later.
	assert.Equal(t, c.Time, drain[0].Time)

	hangNone := func(string) behaviour { return okBehaviour() }
	evs, _, _, err = simulate(t, sc, hangNone)
	require.NoError(t, err)
	drain = ofType(evs, ledger.EventDrain)
	require.Len(t, drain, 1)
	assert.True(t, *drain[0].Passed)
	assert.Equal(t, "all requests resolved 0s after load stopped", drain[0].Detail)
}

func TestLeakCheck(t *testing.T) {
	yaml := `
name: sim-leak
duration: 5s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: b, type: burst, count: 2}
deadlines: {first_token: 1s, stall: 1s, total: 3s}
drain: {timeout: 8s, leak_timeout: 3s}
assertions: [no_leaks]
`
	tests := []struct {
		name   string
		plan   map[string]behaviour
		passed bool
		detail string
		rest   map[string]float64
	}{
		{name: "aborts reach the server", plan: map[string]behaviour{"b-000001": {hangAfter: 1, failAfter: -1}}, passed: true,
			detail: "running and queued gauges at 0 after 0s (4 gauges on 2 endpoints)"},
		{name: "an abort is lost", plan: map[string]behaviour{"b-000001": {hangAfter: 1, failAfter: -1, leakOnCancel: true}}, passed: false,
			detail: "not drained after 3s: decode-0/sglang:num_running_reqs = 1",
			rest:   map[string]float64{"decode-0/sglang:num_running_reqs": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sc := parse(t, yaml)
			require.NoError(t, Run(context.Background(), sc, Options{OutDir: dir,
				NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) { return newFake(l, planBy(tt.plan)), nil }}))
			evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
			require.NoError(t, err)
			leak := ofType(evs, ledger.EventLeakCheck)
			require.Len(t, leak, 1)
			require.NotNil(t, leak[0].Passed)
			assert.Equal(t, tt.passed, *leak[0].Passed)
			assert.Equal(t, tt.detail, leak[0].Detail)
			assert.Equal(t, tt.rest, leak[0].Metrics)
			res := reports.Compute(evs, judge.ReportConfig(sc))
			assert.Equal(t, "sim", res.Mode)
			want := reports.VerdictPass
			if !tt.passed {
				want = reports.VerdictFail
			}
			assert.Equal(t, want, res.Verdict, "%+v", res.Assertions)
		})
	}
}

func TestSameSeedSameLedger(t *testing.T) {
	yaml := `
name: sim-determinism
seed: 11
duration: 15s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: agents, type: agents, agents: 6, turns: 3, max_tokens: 5, retries: 2, tool_latency: 150ms, think_time: 300ms, restart: true}
  - {name: steady, type: open_loop, pacer: {type: poisson, rate: 4}}
faults:
  - {name: stall, type: scheduler_stall, target: decode, at: 3s, for: 2s}
  - {name: aborts, type: client_disconnect, target: steady, at: 6s, for: 4s, params: {after_tokens: 2, fraction: 0.5}}
deadlines: {first_token: 2s, stall: 1s, total: 4s}
assertions: [no_silent_drops]
`
	plan := planBy(map[string]behaviour{
		"agents-s002": {tokens: 6, gap: 700 * time.Millisecond, hangAfter: -1, failAfter: -1},
		"agents-s003": {hangAfter: 3, failAfter: -1},
	})
	_, a, _, err := simulate(t, parse(t, yaml), plan)
	require.NoError(t, err)
	_, b, _, err := simulate(t, parse(t, yaml), plan)
	require.NoError(t, err)
	require.Greater(t, bytes.Count(a, []byte("\n")), 100)
	assert.True(t, bytes.Equal(a, b), "two runs of one seed wrote different ledgers")
	assert.Contains(t, string(a), `"mode":"sim"`)
	assert.Contains(t, string(a), `"time":"2000-01-01T00:00:00Z","type":"run_start"`)

	// Another seed is another run (the test can tell).
	sc := parse(t, yaml)
	sc.Seed = 12
	_, c, _, err := simulate(t, sc, plan)
	require.NoError(t, err)
	assert.False(t, bytes.Equal(a, c))
}

func TestFaults(t *testing.T) {
	yaml := `
name: sim-faults
seed: 5
duration: 10s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 10}, max_tokens: 8}
faults:
  - {name: stall, type: scheduler_stall, target: decode, at: 2s, for: 1s}
  - {name: aborts, type: client_disconnect, target: steady, at: 4s, for: 2s, params: {after_tokens: 3}}
  - {name: extra, type: client_disconnect, target: steady, at: 7s, for: 1s, params: {after_tokens: 2, fraction: 0, requests: 5}}
  - {name: flood, type: queue_saturation, target: decode, at: 8s, params: {requests: 20, max_tokens: 6}}
deadlines: {first_token: 2s, stall: 1s, total: 5s}
assertions: [no_silent_drops]
`
	plan := func(id string) behaviour {
		b := okBehaviour()
		b.tokens = 8
		// The flood's requests past its first two wait in the fake's queue: the
		// client sees a stream served to its end while others had no first token.
		if strings.HasPrefix(id, "steady-burst") && !strings.HasSuffix(id, "-000000") && !strings.HasSuffix(id, "-000001") {
			b.delay = 300 * time.Millisecond
		}
		return b
	}
	evs, _, fake, err := simulate(t, parse(t, yaml), plan)
	require.NoError(t, err)
	assert.Equal(t, []string{"apply stall at 2s", "revert stall at 3s"}, fake.faults)

	type fev struct {
		typ    ledger.EventType
		fault  string
		at     time.Duration
		passed bool
	}
	var got []fev
	for _, e := range evs {
		switch e.Type {
		case ledger.EventFaultStart, ledger.EventFaultStop, ledger.EventFaultVerified:
			p := e.Passed != nil && *e.Passed
			got = append(got, fev{e.Type, e.Fault, e.Time.Sub(Epoch), p})
			if e.Type == ledger.EventFaultVerified {
				assert.True(t, p, "%s: %s %s", e.Fault, e.Detail, e.Error)
				assert.NotEmpty(t, e.Detail)
			}
		}
	}
	starts := map[string]time.Duration{}
	stops := map[string]time.Duration{}
	for _, g := range got {
		switch g.typ {
		case ledger.EventFaultStart:
			starts[g.fault] = g.at
		case ledger.EventFaultStop:
			stops[g.fault] = g.at
		}
	}
	assert.Equal(t, map[string]time.Duration{"stall": 2 * time.Second, "aborts": 4 * time.Second, "extra": 7 * time.Second, "flood": 8 * time.Second}, starts)
	assert.Equal(t, 3*time.Second, stops["stall"])
	assert.Equal(t, 6*time.Second, stops["aborts"])
	assert.Equal(t, 8*time.Second, stops["extra"])
	assert.Equal(t, 10*time.Second, stops["flood"], "held to the end of the drain")
	var order []string
	for _, e := range evs {
		if e.Type == ledger.EventDrain || (e.Type == ledger.EventFaultStop && e.Fault == "flood") || e.Type == ledger.EventLeakCheck {
			order = append(order, string(e.Type))
		}
	}
	assert.Equal(t, []string{"drain", "fault_stop", "leak_check"}, order)

	done := doneByID(evs)
	counts := map[string]map[ledger.Outcome]int{}
	for id, e := range done {
		kind := "steady"
		switch {
		case len(id) > 12 && id[:12] == "steady-abort":
			kind = "abort"
		case len(id) > 12 && id[:12] == "steady-burst":
			kind = "burst"
		}
		if counts[kind] == nil {
			counts[kind] = map[ledger.Outcome]int{}
		}
		counts[kind][e.Outcome]++
		if e.Outcome == ledger.OutcomeCancelled {
			assert.Equal(t, ledger.PhaseMidStream, e.Phase, id)
		}
		// During the stall the server refused with 503 and Retry-After.
		at := e.Scheduled.Sub(Epoch)
		if kind == "steady" && at >= 2*time.Second && at < 3*time.Second {
			assert.Equal(t, ledger.OutcomeRejected, e.Outcome, id)
		}
		if kind == "steady" && at >= 4*time.Second && at < 6*time.Second {
			assert.Equal(t, ledger.OutcomeCancelled, e.Outcome, id)
			assert.Equal(t, 3, e.Chunks, id)
		}
	}
	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeCancelled: 5}, counts["abort"])
	assert.Equal(t, map[ledger.Outcome]int{ledger.OutcomeOK: 20}, counts["burst"])
	assert.Equal(t, 10, counts["steady"][ledger.OutcomeRejected])
	assert.Equal(t, 20, counts["steady"][ledger.OutcomeCancelled])
	assert.Equal(t, "steady-burst2-000000", firstID(evs, "steady-burst"))
}

func TestUnprovedFaultMakesTheRunInvalid(t *testing.T) {
	// Four at a time, each done long before the next poll: no rejection, no queue gauge,
	// no stream seen waiting behind another — chaos's queue_saturation has no proof.
	sc := parse(t, `
name: sim-unproved
duration: 3s
reference: {prefill: 1, decode: 1}
workloads: [{name: b, type: burst, count: 1}]
faults: [{name: flood, type: queue_saturation, target: decode, at: 1s, params: {requests: 20, concurrency: 4}}]
assertions: [no_silent_drops]
`)
	evs, _, _, err := simulate(t, sc, nil)
	require.ErrorIs(t, err, ErrInfrastructure)
	require.ErrorIs(t, err, chaos.ErrNotVerified)
	v := ofType(evs, ledger.EventFaultVerified)
	require.Len(t, v, 1)
	assert.False(t, *v[0].Passed)
	assert.Equal(t, "no proof before the run ended", v[0].Detail)
	res := reports.Compute(evs, judge.ReportConfig(sc))
	assert.Equal(t, reports.VerdictInvalid, res.Verdict)
}

func firstID(evs []ledger.Event, prefix string) string {
	for _, e := range evs {
		if e.Type == ledger.EventScheduled && len(e.RequestID) >= len(prefix) && e.RequestID[:len(prefix)] == prefix {
			return e.RequestID
		}
	}
	return ""
}

func TestRefusedBeforeItRuns(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string
	}{
		{name: "a fault the topology cannot model", yaml: `
name: sim-refuse
duration: 5s
reference: {prefill: 1, decode: 1}
workloads: [{name: b, type: burst, count: 1}]
faults: [{name: cut, type: network_partition, target: router->decode-0, at: 1s, for: 1s}]
assertions: [no_silent_drops]
`, want: "sim: fault cut (network_partition): fake: network_partition: sim: not modelled"},
		{name: "an external target", yaml: `
name: sim-external
duration: 5s
target: {url: "http://127.0.0.1:9"}
workloads: [{name: b, type: burst, count: 1}]
assertions: [no_silent_drops]
`, want: "sim: not modelled: the target is the external http://127.0.0.1:9 (target.url or --target); --sim simulates the reference server only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Run(context.Background(), parse(t, tt.yaml), Options{OutDir: dir,
				NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) {
					f := newFake(l, nil)
					f.refuse["network_partition"] = true
					return f, nil
				}})
			require.ErrorIs(t, err, ErrNotModelled)
			assert.EqualError(t, err, tt.want)
			assert.NoFileExists(t, filepath.Join(dir, ledger.EventsFile), "refused before anything is written")
		})
	}
}

func TestConnectionFailures(t *testing.T) {
	sc := parse(t, `
name: sim-conn
duration: 2s
reference: {prefill: 1, decode: 1}
workloads: [{name: b, type: burst, count: 5}]
assertions: [no_silent_drops]
`)
	plan := planBy(map[string]behaviour{
		"b-000000": {refuse: ErrConnRefused},
		"b-000001": {hangAfter: -1, failAfter: 0, failErr: ErrConnReset},
		"b-000002": {tokens: 4, hangAfter: -1, failAfter: 2, failErr: ErrConnReset},
		// A worker leg reset under the router: the router answers with an error event.
		"b-000004": {tokens: 4, hangAfter: -1, failAfter: 1, failErr: fmt.Errorf("router: decode-0: %w: %w", gen.ErrInternal, ErrConnReset)},
	})
	evs, _, _, err := simulate(t, sc, plan)
	require.NoError(t, err)
	done := doneByID(evs)
	tests := []struct {
		id      string
		outcome ledger.Outcome
		phase   ledger.Phase
		status  int
	}{
		{"b-000000", ledger.OutcomeTransportError, "", 0},
		{"b-000001", ledger.OutcomeTransportError, "", 0},
		{"b-000002", ledger.OutcomeConnectionLost, "", 200}, // a reset mid-stream: an abrupt end
		{"b-000003", ledger.OutcomeOK, "", 200},
		{"b-000004", ledger.OutcomeStreamError, "", 200},
	}
	for _, tt := range tests {
		e := done[tt.id]
		assert.Equal(t, tt.outcome, e.Outcome, "%s: %s", tt.id, e.Error)
		assert.Equal(t, tt.status, e.Status, tt.id)
	}
	assert.Equal(t, 2, done["b-000002"].Chunks)
}

func TestInterruptedRunIsRecorded(t *testing.T) {
	sc := parse(t, `
name: sim-interrupt
duration: 20s
reference: {prefill: 1, decode: 1}
workloads: [{name: agents, type: agents, agents: 3, turns: 0, think_time: 1s}]
assertions: [no_silent_drops]
`)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(context.Canceled)
	dir := t.TempDir()
	require.NoError(t, Run(ctx, sc, Options{OutDir: dir,
		NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) { return newFake(l, nil), nil }}))
	evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	end := ofType(evs, ledger.EventRunEnd)
	require.Len(t, end, 1)
	assert.Equal(t, "context canceled", end[0].Interrupted)
	assert.Equal(t, reports.VerdictInvalid, reports.Compute(evs, judge.ReportConfig(sc)).Verdict)
	for _, e := range ofType(evs, ledger.EventDone) {
		assert.Equal(t, ledger.OutcomeCancelled, e.Outcome, e.RequestID)
	}
}

// TestInterruptHidesNoDrop: requests still in flight when the run is interrupted are
// judged by the runner's rule (judge.ReclassifyAtInterrupt), not recorded as cancelled:
// within their deadlines they are unresolved_at_interrupt, in the phase they were in.
func TestInterruptHidesNoDrop(t *testing.T) {
	sc := parse(t, `
name: sim-interrupt-midway
duration: 20s
reference: {prefill: 1, decode: 1}
deadlines: {first_token: 10s, stall: 10s, total: 30s}
workloads: [{name: agents, type: agents, agents: 2, turns: 1}]
assertions: [no_silent_drops]
`)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dir := t.TempDir()
	hang := okBehaviour()
	hang.delay = time.Hour // no answer at all
	require.NoError(t, Run(ctx, sc, Options{OutDir: dir, SampleInterval: 500 * time.Millisecond,
		OnEvent: func(ev ledger.Event) {
			if ev.Type == ledger.EventSample { // the first one, at 0.5 s
				cancel(context.Canceled)
			}
		},
		NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) {
			return newFake(l, func(string) behaviour { return hang }), nil
		}}))
	evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	done := ofType(evs, ledger.EventDone)
	require.Len(t, done, 2)
	for _, e := range done {
		assert.Equal(t, ledger.OutcomeUnresolved, e.Outcome, e.RequestID)
		assert.Equal(t, ledger.PhaseBeforeHeaders, e.Phase, e.RequestID)
		assert.Equal(t, "harness: still in flight, within its deadlines, when the run was interrupted", e.Error)
	}
}

func TestOpenLoopMaxInFlight(t *testing.T) {
	sc := parse(t, `
name: sim-capped
duration: 2s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: capped, type: open_loop, pacer: {type: constant, rate: 10}, max_in_flight: 2}
assertions: [no_silent_drops]
`)
	slow := func(string) behaviour {
		return behaviour{tokens: 4, gap: 100 * time.Millisecond, hangAfter: -1, failAfter: -1}
	}
	evs, _, _, err := simulate(t, sc, slow)
	require.NoError(t, err)
	inflight, most := 0, 0
	lagged := 0
	for _, e := range evs {
		switch e.Type {
		case ledger.EventSent:
			inflight++
			most = max(most, inflight)
			if e.Lag > 0 {
				lagged++
			}
		case ledger.EventDone:
			inflight--
			assert.Equal(t, ledger.OutcomeOK, e.Outcome)
		}
	}
	assert.Equal(t, 2, most, "max_in_flight holds")
	assert.Positive(t, lagged, "hits waited for a worker")
	sent := len(ofType(evs, ledger.EventSent))
	assert.Less(t, sent, 20, "hits still waiting when the attack stopped (window + 1s) are not sent")
	assert.Greater(t, sent, 10)
	assert.Contains(t, ofType(evs, ledger.EventSelfCheck)[0].Detail, "(0 requests)", "a throttled workload's lag says nothing about the harness")
}

func TestKVExhaustionIsAClientBurst(t *testing.T) {
	sc := parse(t, `
name: sim-kv
duration: 4s
reference: {prefill: 1, decode: 1}
workloads: [{name: b, type: burst, count: 1}]
faults: [{name: exhaust, type: kv_pool_exhaustion, target: decode, at: 1s, for: 2s, params: {requests: 6, prompt_tokens: 64, max_tokens: 4}}]
assertions: [no_silent_drops]
`)
	var fake *fakeServer
	evs, _, err := simulateWith(t, sc, func(l *Loop) Server {
		fake = newFake(l, nil)
		fake.refuse["kv_pool_exhaustion"] = true // never handed to the topology
		return fake
	})
	require.NoError(t, err)
	assert.Empty(t, fake.faults)
	n := 0
	for _, e := range ofType(evs, ledger.EventScheduled) {
		if e.Workload == "b-burst1" {
			n++
			assert.Equal(t, time.Second, e.Time.Sub(Epoch))
		}
	}
	assert.Equal(t, 6, n)
	v := ofType(evs, ledger.EventFaultVerified)
	require.Len(t, v, 1)
	assert.True(t, *v[0].Passed, v[0].Detail)
}

func TestProbeAndRestart(t *testing.T) {
	sc := parse(t, `
name: sim-probe
duration: 3s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: probe, type: probe, count: 2, interval: 1s}
  - {name: agents, type: agents, agents: 1, turns: 1, restart: true, think_time: 900ms}
assertions: [no_silent_drops, consistent_outputs]
`)
	evs, _, _, err := simulate(t, sc, nil)
	require.NoError(t, err)
	var probes, convs []string
	for _, e := range ofType(evs, ledger.EventDone) {
		switch e.Workload {
		case "probe":
			probes = append(probes, fmt.Sprintf("%s@%v=%s", e.RequestID, e.Scheduled.Sub(Epoch), e.Text))
		case "agents":
			convs = append(convs, e.RequestID)
		}
	}
	assert.Equal(t, []string{"probe-p0-r000@0s=abcd", "probe-p1-r000@0s=abcd", "probe-p0-r001@1s=abcd",
		"probe-p1-r001@1s=abcd", "probe-p0-r002@2s=abcd", "probe-p1-r002@2s=abcd"}, probes)
	// One turn per conversation, then a fresh one (ids -c002, -c003, ...) until the window ends.
	assert.Equal(t, []string{"agents-s001-t001", "agents-s001-c002-t001", "agents-s001-c003-t001", "agents-s001-c004-t001"}, convs)
	assert.Equal(t, reports.VerdictPass, reports.Compute(evs, judge.ReportConfig(sc)).Verdict)
}

// TestOpenLoopUnsentNoted: an open loop whose max_in_flight holds hits past its window
// (plus StopGrace) drops them, as the real attacker does, and the ledger says how many of
// its scheduled requests were never sent (workload.UnsentNote, the runner's note too).
func TestOpenLoopUnsentNoted(t *testing.T) {
	yaml := `
name: sim-unsent
seed: 1
duration: 1s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: capped, type: open_loop, max_in_flight: 1, pacer: {type: constant, rate: 20}}
deadlines: {first_token: 5s, stall: 5s, total: 5s}
assertions: [no_silent_drops]
`
	slow := behaviour{tokens: 4, gap: 200 * time.Millisecond, hangAfter: -1, failAfter: -1} // 0.8 s a request
	evs, _, _, err := simulate(t, parse(t, yaml), planBy(map[string]behaviour{"capped": slow}))
	require.NoError(t, err)
	var notes []string
	sent := 0
	for _, e := range evs {
		switch e.Type {
		case ledger.EventNote:
			notes = append(notes, e.Message)
		case ledger.EventSent:
			sent++
		}
	}
	// 19 scheduled in [0, 1 s), one at a time at 0.8 s each until 2 s: 3 sent.
	assert.Equal(t, 3, sent)
	assert.Contains(t, notes, "workload capped sent 3 of its 19 scheduled requests: max_in_flight 1 held them until the window ended; the 16 others were never sent")
}
