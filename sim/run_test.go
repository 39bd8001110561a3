package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/harness"
	"pdsoak/ledger"
	"pdsoak/scenarios"
	"pdsoak/server/gen"
)

func parse(t testing.TB, yaml string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(yaml), scenarios.WithFaultTypes(chaos.FaultTypes()))
	require.NoError(t, err)
	return sc
}

// simulate runs sc against a fake built by mk and returns the ledger's events, its
// bytes and the fake.
func simulate(t testing.TB, sc *scenarios.Scenario, plan func(string) behaviour, tweak ...func(*fakeServer)) ([]ledger.Event, []byte, *fakeServer, error) {
	t.Helper()
	dir := t.TempDir()
	var fake *fakeServer
	err := Run(context.Background(), sc, Options{OutDir: dir, CommandLine: []string{"harness", "run", "--sim"},
		NewServer: func(l *Loop, _ *scenarios.Scenario) (Server, error) {
			fake = newFake(l, plan)
			for _, f := range tweak {
				f(fake)
			}
			return fake, nil
		}})
	b, rerr := os.ReadFile(filepath.Join(dir, ledger.EventsFile))
	if rerr != nil {
		return nil, nil, fake, err
	}
	evs, _, rerr := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, rerr)
	return evs, b, fake, err
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
	var rep harness.DebugReport
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
