package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
)

// The server-side faults are chaos's own, run on the model (FaultEnv): their proofs are
// chaos's Verify reading the model's processes and links, at the virtual time the proof
// exists — a restart is proved once the process is back, after RestartDelay and the
// verify polls' back-off — not a stamp written when the fault is applied.
func TestChaosFaultsRunOnTheModel(t *testing.T) {
	evs, res := simulateTopology(t, `
name: sim-chaos-faults
duration: 12s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 5}, max_tokens: 8}
faults:
  - {name: bounce, type: process_restart, target: prefill-0, at: 1s}
  - {name: freeze, type: process_pause, target: decode-0, at: 4s, for: 1s}
  - {name: cut, type: network_partition, target: router->decode-0, at: 7s, for: 1s}
  - {name: slow, type: network_latency, target: router->prefill-0, at: 9s, for: 1s, params: {latency: 20ms}}
assertions: [no_silent_drops]
`)
	verified := map[string]ledger.Event{}
	stops := map[string]time.Duration{}
	for _, e := range evs {
		switch e.Type {
		case ledger.EventFaultVerified:
			verified[e.Fault] = e
		case ledger.EventFaultStop:
			stops[e.Fault] = e.Time.Sub(Epoch)
		}
	}
	for name, want := range map[string]struct {
		at     time.Duration
		detail string
	}{
		// Polls at +0, +20ms, +40ms, +80ms, +160ms, +320ms: the first after the 500ms
		// restart is at 620ms.
		"bounce": {1620 * time.Millisecond, "restarted: prefill-0 pid"},
		"freeze": {4 * time.Second, "stopped: decode-0: pid"},
		"cut":    {7 * time.Second, "links router->decode-0 down: dialling their proxies is refused"},
		// chaos's own proof: bytes of the toxic's stream (downstream, the default) crossed
		// it after it was added (the poll at +20ms saw them).
		"slow": {9020 * time.Millisecond, "latency toxic map[jitter:0 latency:20] on router->prefill-0; downstream bytes through it since it was added: router->prefill-0: +"},
	} {
		ev, ok := verified[name]
		require.True(t, ok, "%s never verified", name)
		assert.True(t, *ev.Passed, "%s: %s", name, ev.Error)
		assert.Equal(t, want.at, ev.Time.Sub(Epoch), name)
		assert.True(t, strings.HasPrefix(ev.Detail, want.detail), "%s: %q", name, ev.Detail)
	}
	assert.Equal(t, map[string]time.Duration{"freeze": 5 * time.Second, "cut": 8 * time.Second, "slow": 10 * time.Second,
		"bounce": stops["bounce"]}, stops)
	assert.NotEqual(t, reports.VerdictInvalid, res.Verdict)
}

// A fault whose mechanism fails on the model fails as it would on the real topology:
// a failpoint cannot be enabled on a process that is down (chaos.ErrApply, exit 3).
func TestFailpointOnADeadProcessIsNotApplied(t *testing.T) {
	sc := parse(t, `
name: sim-dead-failpoint
duration: 6s
reference: {prefill: 1, decode: 1}
workloads:
  - {name: steady, type: open_loop, pacer: {type: constant, rate: 5}, max_tokens: 8}
faults:
  - {name: kill, type: decode_crash, target: decode-0, at: 1s, params: {restart: false}}
  - {name: stall, type: scheduler_stall, target: decode-0, at: 2s, for: 1s}
assertions: [no_silent_drops]
`)
	evs, _, err := simulateWith(t, sc, func(l *Loop) Server {
		srv, err := NewTopology(l, sc)
		require.NoError(t, err)
		return srv
	})
	require.ErrorIs(t, err, ErrInfrastructure)
	require.ErrorIs(t, err, chaos.ErrApply)
	var stall *ledger.Event
	for _, e := range ofType(evs, ledger.EventFaultStart) {
		if e.Fault == "stall" {
			stall = &e
		}
	}
	require.NotNil(t, stall, "the failpoint was never tried")
	assert.Contains(t, stall.Error, "connection refused")
}

// TestFailpointProvedByItsHits: a failpoint on the model is proved as on a real
// process, by chaos's Verify reading the hits the simulated process counted; before
// anything evaluates it the proof fails, in chaos's words.
func TestFailpointProvedByItsHits(t *testing.T) {
	loop, srv := build(t, coStrict)
	f := scenarios.Fault{Name: "f", Type: "failpoint", Target: "colocated",
		Params: map[string]any{"name": "engine/admit", "terms": "return(overloaded)"}}
	fault, err := chaos.New(f)
	require.NoError(t, err)
	env := &chaos.FuncEnv{MembersFunc: srv.sc.Topology().Members}
	srv.FaultEnv(env)
	require.NoError(t, fault.Apply(context.Background(), env))
	err = fault.Verify(context.Background(), env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not hit yet on colocated (0 evaluations)")
	s := submit(loop, srv, "r", 40, 8)
	loop.RunUntil(Epoch.Add(time.Second))
	require.True(t, s.err != nil || (s.done != nil && s.done.Err != nil), "engine/admit refused the request")
	require.NoError(t, fault.Verify(context.Background(), env))
	assert.Equal(t, "failpoint engine/admit=return(overloaded) hit 1 times (colocated:1), 0 paused",
		fault.(chaos.Evidencer).Evidence())
	require.NoError(t, fault.Revert(context.Background(), env))
}

// TestFailpointStatusCountsItsHolders: the simulated failpoint's status is counted as
// the registry's (failpoint.Tally): callers held by a pause are Paused and by a sleep
// Sleeping until they are let go; new terms let go of the old ones' callers and restart
// the counts; Disable lets go of the rest, and the requests then complete; the counts
// stay readable until the next Enable.
func TestFailpointStatusCountsItsHolders(t *testing.T) {
	loop, srv := build(t, coStrict)
	env := &chaos.FuncEnv{MembersFunc: srv.sc.Topology().Members}
	srv.FaultEnv(env)
	fps, err := env.Failpoints("colocated")
	require.NoError(t, err)
	ctx := context.Background()
	status := func() failpoint.Status {
		st, err := fps.Get(ctx, failpoint.EngineAdmit)
		require.NoError(t, err)
		return st
	}
	at := func(d time.Duration) { loop.RunUntil(Epoch.Add(d)) }

	_, err = fps.Enable(ctx, failpoint.EngineAdmit, "pause")
	require.NoError(t, err)
	a, b := submit(loop, srv, "a", 40, 4), submit(loop, srv, "b", 40, 4)
	at(time.Second)
	assert.Equal(t, failpoint.Status{Name: failpoint.EngineAdmit, Terms: "pause", Enabled: true, Evals: 2, Hits: 2, Paused: 2}, status())
	assert.Nil(t, a.done, "held at admission")
	e := submit(loop, srv, "e", 40, 4)
	at(1100 * time.Millisecond)
	assert.EqualValues(t, 3, status().Paused)
	e.cancel()
	at(1200 * time.Millisecond)
	assert.EqualValues(t, 2, status().Paused, "a held caller whose client left is let go, as Eval returns when its context ends")

	_, err = fps.Enable(ctx, failpoint.EngineAdmit, "sleep(5000)")
	require.NoError(t, err)
	c := submit(loop, srv, "c", 40, 4)
	at(2 * time.Second)
	assert.Equal(t, failpoint.Status{Name: failpoint.EngineAdmit, Terms: "sleep(5000)", Enabled: true, Evals: 1, Hits: 1, Sleeping: 1}, status(),
		"the pause's callers were let go by the new terms; the counts restarted")
	require.NotNil(t, a.done, "let go by the new terms")
	require.NotNil(t, b.done)
	assert.Nil(t, c.done, "sleeping")

	d := submit(loop, srv, "d", 40, 4)
	require.NoError(t, fps.Disable(ctx, failpoint.EngineAdmit))
	at(3 * time.Second)
	for _, s := range []*stream{a, b, c, d} {
		require.NotNil(t, s.done, "a sleep ends early when the failpoint is disabled, as the registry's")
		assert.NoError(t, s.done.Err)
		assert.Len(t, s.tokens, 4)
	}
	assert.Equal(t, failpoint.Status{Name: failpoint.EngineAdmit, Evals: 2, Hits: 2}, status(),
		"disabled: its counts (c and d slept) stay until the next Enable, as the registry's")
	_, err = fps.Enable(ctx, failpoint.EngineAdmit, "off")
	require.NoError(t, err)
	assert.Equal(t, failpoint.Status{Name: failpoint.EngineAdmit, Terms: "off", Enabled: true}, status(), "the next Enable restarts them")
	assert.Nil(t, e.done, "its client left: nothing reaches it")
}
