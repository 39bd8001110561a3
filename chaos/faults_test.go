package chaos

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
	"pdsoak/supervisor"
)

// faultCase drives one fault type through apply → verify (must fail before the effect)
// → effect → verify → revert against the fake Env.
type faultCase struct {
	name string
	spec scenarios.Fault
	// setup prepares the env; it runs before New.
	setup func(t *testing.T, e *fakeEnv)
	// immediate: the fault proves itself as soon as it is applied (signals, partitions).
	immediate bool
	// effect makes the fault take effect (traffic, an Eval, load statistics). It may
	// return a func the test calls after Revert (to join goroutines).
	effect func(t *testing.T, e *fakeEnv) func()
	// applied checks state after a successful Verify; reverted checks it after Revert.
	applied, reverted func(t *testing.T, e *fakeEnv)
}

func spec(typ, target string, params map[string]any) scenarios.Fault {
	return scenarios.Fault{Name: "f-" + typ, Type: typ, Target: target, Params: params}
}

func fpEnv(process string) func(t *testing.T, e *fakeEnv) {
	return func(t *testing.T, e *fakeEnv) { e.addFailpoints(process, "") }
}

// evalHeld evaluates a failpoint in a goroutine that a stall holds; the returned func
// waits for it (after Revert released it).
func evalHeld(point string) func(t *testing.T, e *fakeEnv) func() {
	return func(t *testing.T, e *fakeEnv) func() {
		r := e.registry["prefill-0"]
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = r.Eval(context.Background(), point) }()
		return wg.Wait
	}
}

func evalExpect(point, want string) func(t *testing.T, e *fakeEnv) func() {
	return func(t *testing.T, e *fakeEnv) func() {
		if v, err := e.registry["prefill-0"].Eval(context.Background(), point); v != want || err != nil {
			t.Fatalf("Eval(%s) = %q, %v; want %q", point, v, err, want)
		}
		return nil
	}
}

func fpDisabled(point string) func(t *testing.T, e *fakeEnv) {
	return func(t *testing.T, e *fakeEnv) {
		if s, _ := e.registry["prefill-0"].Get(point); s.Enabled {
			t.Fatalf("failpoint %s still enabled after revert", point)
		}
	}
}

func linkTraffic(link string) func(t *testing.T, e *fakeEnv) func() {
	return func(t *testing.T, e *fakeEnv) func() {
		_ = e.traffic(link) // toxics may cut it; the counters move regardless
		return nil
	}
}

func noToxics(link string) func(t *testing.T, e *fakeEnv) {
	return func(t *testing.T, e *fakeEnv) {
		k, _ := e.links.Link(link)
		if got := k.Toxics(); len(got) != 0 {
			t.Fatalf("toxics left on %s: %v", link, got)
		}
		if err := e.traffic(link); err != nil {
			t.Fatalf("link %s broken after revert: %v", link, err)
		}
	}
}

func setStats(s RunStats) func(t *testing.T, e *fakeEnv) func() {
	return func(t *testing.T, e *fakeEnv) func() { e.lastRun().set(s); return nil }
}

func runStopped(t *testing.T, e *fakeEnv) {
	if !e.lastRun().stopped.Load() {
		t.Fatal("run not stopped by revert")
	}
}

func procState(name string, want func(supervisor.State) bool, what string) func(t *testing.T, e *fakeEnv) {
	return func(t *testing.T, e *fakeEnv) {
		p, err := e.Process(name)
		require.NoError(t, err)
		if err := waitState(context.Background(), nil, p.PID, func(st supervisor.State, gone bool) bool { return !gone && want(st) }); err != nil {
			t.Fatalf("%s: %v (want %s)", name, err, what)
		}
	}
}

func faultCases() []faultCase {
	link := "prefill-0->decode-0"
	withLink := func(t *testing.T, e *fakeEnv) { e.withLinks(link, "router->decode-0") }
	return []faultCase{
		{name: "kv_transfer_stall pause", spec: spec("kv_transfer_stall", "prefill-0", nil), setup: fpEnv("prefill-0"),
			effect: evalHeld(failpoint.KVTransferSendFrame), reverted: fpDisabled(failpoint.KVTransferSendFrame)},
		{name: "kv_transfer_stall sleep", spec: spec("kv_transfer_stall", "prefill-0", map[string]any{"mode": "sleep", "delay": "1ms"}), setup: fpEnv("prefill-0"),
			effect: evalExpect(failpoint.KVTransferSendFrame, ""), reverted: fpDisabled(failpoint.KVTransferSendFrame)},
		{name: "kv_transfer_drop", spec: spec("kv_transfer_drop", "prefill-0", map[string]any{"count": 2}), setup: fpEnv("prefill-0"),
			effect: evalExpect(failpoint.KVTransferSendFrame, "drop"), reverted: fpDisabled(failpoint.KVTransferSendFrame)},
		{name: "kv_transfer_corrupt", spec: spec("kv_transfer_corrupt", "prefill-0", map[string]any{"probability": 100}), setup: fpEnv("prefill-0"),
			effect: evalExpect(failpoint.KVTransferSendFrame, "corrupt"), reverted: fpDisabled(failpoint.KVTransferSendFrame)},
		{name: "bootstrap_stall", spec: spec("bootstrap_stall", "prefill-0", nil), setup: fpEnv("prefill-0"),
			effect: evalHeld(failpoint.KVTransferBootstrap), reverted: fpDisabled(failpoint.KVTransferBootstrap)},
		{name: "scheduler_stall", spec: spec("scheduler_stall", "prefill-0", map[string]any{"mode": "pause"}), setup: fpEnv("prefill-0"),
			effect: evalHeld(failpoint.EngineStep), reverted: fpDisabled(failpoint.EngineStep)},
		{name: "failpoint generic", spec: spec("failpoint", "prefill-0", map[string]any{"name": "engine/admit", "terms": "return(reject)"}), setup: fpEnv("prefill-0"),
			effect: evalExpect(failpoint.EngineAdmit, "reject"), reverted: fpDisabled(failpoint.EngineAdmit)},

		{name: "prefill_crash", spec: spec("prefill_crash", "prefill-0", nil), immediate: true,
			setup: func(t *testing.T, e *fakeEnv) { e.startProc("prefill-0", "prefill") },
			reverted: func(t *testing.T, e *fakeEnv) {
				if e.restarts != 1 {
					t.Fatalf("restarts = %d, want 1", e.restarts)
				}
				procState("prefill-0", func(st supervisor.State) bool { return st != supervisor.StateZombie }, "alive")(t, e)
			}},
		{name: "decode_crash without restart", spec: spec("decode_crash", "decode-0", map[string]any{"restart": false}), immediate: true,
			setup: func(t *testing.T, e *fakeEnv) { e.startProc("decode-0", "decode") },
			reverted: func(t *testing.T, e *fakeEnv) {
				if e.restarts != 0 {
					t.Fatalf("restarted although restart: false")
				}
			}},
		{name: "process_kill", spec: spec("process_kill", "router", nil), immediate: true,
			setup: func(t *testing.T, e *fakeEnv) { e.startProc("router", "router") }},
		{name: "process_pause", spec: spec("process_pause", "decode-0", nil), immediate: true,
			setup:    func(t *testing.T, e *fakeEnv) { e.startProc("decode-0", "decode") },
			applied:  procState("decode-0", stoppedState, "stopped"),
			reverted: procState("decode-0", func(st supervisor.State) bool { return !stoppedState(st) }, "running")},
		{name: "process_restart", spec: spec("process_restart", "decode-0", nil), immediate: true,
			setup: func(t *testing.T, e *fakeEnv) { e.startProc("decode-0", "decode") }},

		{name: "network_latency", spec: spec("network_latency", link, map[string]any{"latency": "20ms", "stream": "both"}), setup: withLink,
			effect: linkTraffic(link), reverted: noToxics(link)},
		{name: "bandwidth_limit", spec: spec("bandwidth_limit", link, map[string]any{"rate": 10}), setup: withLink,
			effect: linkTraffic(link), reverted: noToxics(link)},
		{name: "connection_reset", spec: spec("connection_reset", link, nil), setup: withLink,
			effect: linkTraffic(link), reverted: noToxics(link)},
		{name: "network_toxic slicer", spec: spec("network_toxic", link, map[string]any{"toxic": "slicer", "average_size": 2, "delay": 10}), setup: withLink,
			effect: linkTraffic(link), reverted: noToxics(link)},
		{name: "network_partition", spec: spec("network_partition", link, nil), setup: withLink, immediate: true,
			reverted: noToxics(link)},

		{name: "queue_saturation", spec: spec("queue_saturation", "client", map[string]any{"requests": 10}),
			effect: setStats(RunStats{Sent: 10, Rejected: 3}), reverted: runStopped},
		{name: "queue_saturation queued", spec: spec("queue_saturation", "client", map[string]any{"requests": 10}),
			effect: setStats(RunStats{Sent: 10, Done: 2, FirstTokens: 5, QueuedBehind: 5}), reverted: runStopped},
		{name: "kv_pool_exhaustion", spec: spec("kv_pool_exhaustion", "decode-0", map[string]any{"min_usage": 0.9}),
			setup: func(t *testing.T, e *fakeEnv) {
				e.members["decode-0"] = []string{"decode-0"}
				e.scrape["decode-0"] = map[string]float64{"sglang:token_usage": 0.2}
			},
			effect: func(t *testing.T, e *fakeEnv) func() {
				e.mu.Lock()
				e.scrape["decode-0"] = map[string]float64{"sglang:token_usage": 0.97}
				e.mu.Unlock()
				return nil
			}, reverted: runStopped},
		{name: "client_disconnect", spec: spec("client_disconnect", "client", map[string]any{"after_tokens": 3}),
			effect: setStats(RunStats{Sent: 5, Cancelled: 2}), reverted: runStopped},
	}
}

func TestEveryFaultType(t *testing.T) {
	for _, tc := range faultCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			f, err := New(tc.spec)
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, f.Apply(ctx, e), "Apply")
			if !tc.immediate {
				if err := f.Verify(ctx, e); err == nil {
					t.Fatal("Verify passed before the fault could have taken effect")
				}
			}
			var join func()
			if tc.effect != nil {
				join = tc.effect(t, e)
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) { // a bounded poll, as the timeline does
				assert.NoError(c, f.Verify(ctx, e), "Verify after the effect")
			}, waitBound, 10*time.Millisecond)
			if ev, ok := f.(Evidencer); !ok || ev.Evidence() == "" {
				t.Error("no evidence recorded")
			}
			if tc.applied != nil {
				tc.applied(t, e)
			}
			require.NoError(t, f.Revert(ctx, e), "Revert")
			if join != nil {
				join()
			}
			if tc.reverted != nil {
				tc.reverted(t, e)
			}
		})
	}
}

// TestCatalogueComplete checks that every fault of issue 5's catalogue is registered and
// covered by TestEveryFaultType.
func TestCatalogueComplete(t *testing.T) {
	catalogue := []string{"queue_saturation", "kv_transfer_stall", "kv_transfer_drop", "kv_transfer_corrupt",
		"bootstrap_stall", "prefill_crash", "decode_crash", "process_pause", "network_latency",
		"network_partition", "connection_reset", "bandwidth_limit", "kv_pool_exhaustion",
		"scheduler_stall", "client_disconnect"}
	known := KnownTypes()
	tested := map[string]bool{}
	for _, tc := range faultCases() {
		tested[tc.spec.Type] = true
	}
	for _, c := range catalogue {
		if !known[c] {
			t.Errorf("%s is not registered", c)
		}
	}
	for _, typ := range Types() {
		if !tested[typ.Name] {
			t.Errorf("registered type %s has no case in TestEveryFaultType", typ.Name)
		}
		if typ.Doc == "" || typ.Targets == 0 {
			t.Errorf("type %s lacks Doc or Targets", typ.Name)
		}
	}
}

// TestSilentNoOpIsCaught: when the mechanism does nothing, Verify must fail.
func TestSilentNoOpIsCaught(t *testing.T) {
	t.Run("signal ignored", func(t *testing.T) {
		for _, typ := range []string{"prefill_crash", "process_pause"} {
			e := newFakeEnv(t)
			e.startProc("prefill-0", "prefill")
			noop := &noopSignalEnv{fakeEnv: e}
			f, err := New(spec(typ, "prefill-0", nil))
			require.NoError(t, err)
			require.NoError(t, f.Apply(context.Background(), noop))
			if err := f.Verify(context.Background(), noop); err == nil {
				t.Errorf("%s: Verify passed although the signal was never sent", typ)
			}
			_ = f.Revert(context.Background(), noop)
		}
	})
	t.Run("failpoint never evaluated", func(t *testing.T) {
		e := newFakeEnv(t)
		e.addFailpoints("prefill-0", "")
		f, _ := New(spec("kv_transfer_corrupt", "prefill-0", nil))
		require.NoError(t, f.Apply(context.Background(), e))
		err := f.Verify(context.Background(), e)
		if err == nil || !strings.Contains(err.Error(), "not hit yet") {
			t.Fatalf("Verify = %v", err)
		}
		_ = f.Revert(context.Background(), e)
	})
	t.Run("failpoint lost by a restart", func(t *testing.T) {
		e := newFakeEnv(t)
		r := e.addFailpoints("prefill-0", "")
		f, _ := New(spec("kv_transfer_drop", "prefill-0", nil))
		require.NoError(t, f.Apply(context.Background(), e))
		r.DisableAll()
		if err := f.Verify(context.Background(), e); err == nil || !strings.Contains(err.Error(), "no longer enabled") {
			t.Fatalf("Verify = %v", err)
		}
	})
	t.Run("kv_pool_exhaustion without pressure", func(t *testing.T) {
		e := newFakeEnv(t)
		e.members["decode-0"] = []string{"decode-0"}
		e.scrape["decode-0"] = map[string]float64{"sglang:token_usage": 0.5}
		f, _ := New(spec("kv_pool_exhaustion", "decode-0", nil))
		require.NoError(t, f.Apply(context.Background(), e))
		e.lastRun().set(RunStats{Sent: 64, Done: 10}) // all sent is not proof of exhaustion
		if err := f.Verify(context.Background(), e); err == nil {
			t.Fatal("Verify passed without evidence of exhaustion")
		}
		_ = f.Revert(context.Background(), e)
	})
}

// noopSignalEnv swallows signals: the silent no-op a fault must catch.
type noopSignalEnv struct{ *fakeEnv }

func (noopSignalEnv) Signal(string, syscall.Signal) error { return nil }

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name  string
		spec  scenarios.Fault
		setup func(t *testing.T, e *fakeEnv)
		want  string
	}{
		{"role mismatch", spec("prefill_crash", "decode-0", nil),
			func(t *testing.T, e *fakeEnv) { e.startProc("decode-0", "decode") }, `role "decode"`},
		{"missing target", spec("decode_crash", "decode-9", nil), nil, "names nothing"},
		{"no proxy", spec("network_latency", "router->decode-0", nil),
			func(t *testing.T, e *fakeEnv) { e.members["router->decode-0"] = []string{"router->decode-0"} }, "not supported"},
		{"no admin API", spec("scheduler_stall", "decode-0", nil),
			func(t *testing.T, e *fakeEnv) { e.startProc("decode-0", "decode") }, "no admin API"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			f, err := New(tc.spec)
			require.NoError(t, err)
			err = f.Apply(context.Background(), e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply = %v, want error containing %q", err, tc.want)
			}
			require.NoError(t, f.Revert(context.Background(), e), "Revert after a failed Apply")
		})
	}
}

func TestMultipleMembers(t *testing.T) {
	e := newFakeEnv(t)
	e.startProc("decode-0", "decode")
	e.startProc("decode-1", "decode")
	e.members["decode"] = []string{"decode-0", "decode-1"}
	f, err := New(spec("process_pause", "decode", nil))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.Apply(ctx, e))
	for _, n := range []string{"decode-0", "decode-1"} {
		procState(n, stoppedState, "stopped")(t, e)
	}
	require.NoError(t, f.Verify(ctx, e))
	require.NoError(t, f.Revert(ctx, e))
}
