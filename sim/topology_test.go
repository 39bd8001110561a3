package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/kernels"
	"pdsoak/scenarios"
	"pdsoak/server/api"
	"pdsoak/server/engine"
	"pdsoak/server/gen"
)

// scenario parses a scenario whose reference block is ref (YAML lines, indented two
// spaces) with one probe workload (the topology ignores workloads).
func scenario(t testing.TB, ref string, faults string) *scenarios.Scenario {
	t.Helper()
	y := "name: t\nseed: 7\nduration: 10s\nreference:\n" + ref + "\nworkloads:\n  - name: w\n    type: burst\n    count: 1\n"
	if faults != "" {
		y += "faults:\n" + faults
	}
	sc, err := scenarios.Parse("t.yaml", []byte(y), scenarios.WithFaultTypes(chaos.FaultTypes()))
	require.NoError(t, err)
	return sc
}

func build(t testing.TB, ref string) (*Loop, *topo) {
	t.Helper()
	loop := NewLoop(Epoch)
	srv, err := NewTopology(loop, scenario(t, ref, ""))
	require.NoError(t, err)
	return loop, srv.(*topo)
}

const (
	pdStrict = "  prefill: 1\n  decode: 1\n  backend: tinyref\n  semantics: strict"
	pdSGLang = "  prefill: 1\n  decode: 1\n  backend: tinyref\n  semantics: sglang"
	coStrict = "  prefill: 0\n  decode: 0\n  backend: tinyref\n  semantics: strict"
)

// stream records one request's events.
type stream struct {
	tokens  []int
	done    *gen.Event
	firstAt time.Time
	doneAt  time.Time
	cancel  func()
	err     error // refused at Submit
}

func prompt(n int, salt int) []int {
	p := []int{kernels.TokenBOS}
	for i := 1; i < n; i++ {
		p = append(p, 'a'+(i*7+salt)%26)
	}
	return p
}

func submit(loop *Loop, srv Server, id string, n, maxTokens int) *stream {
	s := &stream{}
	req := &gen.Request{ID: id, Prompt: prompt(n, len(id)), MaxTokens: maxTokens, IgnoreEOS: true}
	cancel, err := srv.Submit(req, func(ev gen.Event) {
		if len(ev.Tokens) > 0 && s.firstAt.IsZero() {
			s.firstAt = loop.Now()
		}
		s.tokens = append(s.tokens, ev.Tokens...)
		if ev.Done {
			if s.done != nil {
				panic("two done events")
			}
			e := ev
			s.done = &e
			s.doneAt = loop.Now()
		}
	})
	s.cancel, s.err = cancel, err
	return s
}

// realSimtime runs req on a real colocated engine with the simtime backend (the
// reference for what a real simtime run gives).
func realSimtime(t *testing.T, seed uint64, req *gen.Request) []int {
	t.Helper()
	kc := kernels.DefaultConfig()
	kc.Backend, kc.Profile, kc.Seed = kernels.BackendSimTime, "tiny-cpu", seed
	b, err := kernels.New(kc)
	require.NoError(t, err)
	e, err := engine.New(b, engine.DefaultConfig())
	require.NoError(t, err)
	e.Start()
	defer func() { _ = e.Shutdown(context.Background()) }()
	ch, err := e.Generate(context.Background(), req)
	require.NoError(t, err)
	var toks []int
	for ev := range ch {
		toks = append(toks, ev.Tokens...)
		require.NoError(t, ev.Err)
	}
	return toks
}

func TestCompletesLikeARealSimtimeRun(t *testing.T) {
	for _, tc := range []struct{ name, ref string }{
		{"colocated", coStrict},
		{"pd strict", pdStrict},
		{"pd sglang", pdSGLang},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop, srv := build(t, tc.ref)
			s := submit(loop, srv, "r1", 40, 24)
			require.NoError(t, s.err)
			loop.RunUntil(Epoch.Add(5 * time.Second))
			require.NotNil(t, s.done)
			require.NoError(t, s.done.Err)
			want := realSimtime(t, 7, &gen.Request{ID: "r1", Prompt: prompt(40, 2), MaxTokens: 24, IgnoreEOS: true})
			assert.Equal(t, want, s.tokens, "same tokens as the real simtime engine")
			assert.Equal(t, 24, s.done.CompletionTokens)
			assert.Equal(t, "length", s.done.Finish)
			assert.Empty(t, srv.Requests()["decode-0"])
		})
	}
}

func TestStrictRefusesAtAdmissionWhenTheQueueIsFull(t *testing.T) {
	loop, srv := build(t, coStrict+"\n  args: [--max-queued-requests=1, --retry-after=3]")
	a := submit(loop, srv, "a", 20, 8)
	b := submit(loop, srv, "b", 20, 8)
	require.NoError(t, a.err)
	require.Error(t, b.err)
	var oe *gen.OverloadError
	require.ErrorAs(t, b.err, &oe)
	assert.Equal(t, 3*time.Second, oe.RetryAfter)
	assert.ErrorIs(t, b.err, gen.ErrOverloaded)
	loop.RunUntil(Epoch.Add(time.Second))
	require.NotNil(t, a.done)
	assert.NoError(t, a.done.Err)
}

// The front end is the real API handler, told the context length as the real router
// is: the decode worker's, unless the router has its own.
func TestFrontEndRefusesOverTheContextLength(t *testing.T) {
	for name, ref := range map[string]string{
		"the decode worker's": pdStrict + "\n  decode_args: [--context-length=64]",
		"the router's":        pdStrict + "\n  router_args: [--context-length=64]",
		"colocated":           coStrict + "\n  args: [--context-length=64]",
	} {
		t.Run(name, func(t *testing.T) {
			_, srv := build(t, ref)
			var fe FrontEnd = srv
			h := api.New(nil, fe.APIOptions()...)
			body := func(words, maxTokens int) []byte {
				return []byte(fmt.Sprintf(`{"model":"ref","prompt":%q,"max_tokens":%d}`, strings.Repeat("a", words), maxTokens))
			}
			_, ref := h.ParseOpenAI("/v1/completions", body(60, 8))
			require.NotNil(t, ref)
			assert.Equal(t, 400, ref.Status)
			require.NotNil(t, ref.Body.Error.Code)
			assert.Equal(t, "context_length_exceeded", *ref.Body.Error.Code)
			_, ref = h.ParseOpenAI("/v1/completions", body(50, 8))
			assert.Nil(t, ref)
		})
	}
}

func TestSGLangWedgesTheDecodePreallocQueueWithFrozenGauges(t *testing.T) {
	loop, srv := build(t, pdSGLang+"\n  decode_args: [--max-total-tokens=768]")
	s := submit(loop, srv, "big", 300, 8) // 300 + 512 reserved > 768: never fits
	require.NoError(t, s.err)
	loop.RunUntil(Epoch.Add(20 * time.Second))
	assert.Nil(t, s.done, "nothing errors: the request hangs")
	reqs := srv.Requests()
	require.Len(t, reqs["decode-0"], 1)
	assert.Equal(t, "prealloc", reqs["decode-0"][0].Stage)
	assert.InDelta(t, 20, reqs["decode-0"][0].StageAgeSeconds, 0.1)
	require.Len(t, reqs["prefill-0"], 1)
	assert.Equal(t, "bootstrap", reqs["prefill-0"][0].Stage)
	g := srv.Gauges()
	assert.Equal(t, 0.0, g["decode-0"]["sglang:num_decode_prealloc_queue_reqs"], "decode gauges are frozen (refreshed only after decode steps)")
	assert.Equal(t, 0.0, g["prefill-0"]["sglang:num_prefill_prealloc_queue_reqs"], "prefill's too: it never stepped")
	assert.Equal(t, 1.0, g[ProcessRouter]["pdsoak_router_healthy_pairs"], "/health stays green")
}

// fault runs one request with a fault applied at `at` (and reverted at `until`, when
// not zero) and returns the stream and the topology.
func runFault(t *testing.T, ref string, f scenarios.Fault, at, until, end time.Duration, n, maxTokens int) (*stream, *topo, *Loop) {
	t.Helper()
	loop, srv := build(t, ref)
	require.NoError(t, srv.CanModel(f))
	s := submit(loop, srv, "r", n, maxTokens)
	require.NoError(t, s.err)
	var stop func()
	loop.At(Epoch.Add(at), func() {
		var err error
		stop, err = srv.Fault(f)
		require.NoError(t, err)
	})
	if until > 0 {
		loop.At(Epoch.Add(until), func() { stop() })
	}
	loop.RunUntil(Epoch.Add(end))
	return s, srv, loop
}

func TestFaultsHaveTheirEffect(t *testing.T) {
	type check func(t *testing.T, s *stream, srv *topo)
	failsWith := func(sentinel error, text string) check {
		return func(t *testing.T, s *stream, srv *topo) {
			require.NotNil(t, s.done, "the request must end")
			require.Error(t, s.done.Err)
			if sentinel != nil {
				assert.ErrorIs(t, s.done.Err, sentinel)
			}
			assert.Contains(t, s.done.Err.Error(), text)
			for name, rs := range srv.Requests() {
				assert.Empty(t, rs, "nothing left on %s", name)
			}
		}
	}
	for _, tc := range []struct {
		name             string
		ref              string
		fault            scenarios.Fault
		at, until, end   time.Duration
		prompt, maxToken int
		check            check
	}{
		{"decode_crash fails the stream in flight", pdStrict,
			scenarios.Fault{Name: "f", Type: "decode_crash", Target: "decode-0", Params: map[string]any{"restart": false}},
			30 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(gen.ErrInternal, "connection reset")},
		{"prefill_crash before the KV fails the request", pdStrict,
			scenarios.Fault{Name: "f", Type: "prefill_crash", Target: "prefill-0", Params: map[string]any{"restart": false}},
			0, 0, 2 * time.Second, 40, 40, failsWith(nil, "")},
		{"kv_transfer_corrupt fails on the checksum", pdStrict,
			scenarios.Fault{Name: "f", Type: "kv_transfer_corrupt", Target: "prefill-0"},
			0, 0, 2 * time.Second, 40, 8, failsWith(gen.ErrTransfer, "checksum mismatch")},
		{"kv_transfer_drop fails on the lost connection", pdStrict,
			scenarios.Fault{Name: "f", Type: "kv_transfer_drop", Target: "prefill-0"},
			0, 0, 2 * time.Second, 40, 8, failsWith(gen.ErrTransfer, "connection lost")},
		{"kv_transfer_stall holds the transfer until the transfer bound", pdStrict,
			scenarios.Fault{Name: "f", Type: "kv_transfer_stall", Target: "prefill-0"},
			0, 0, 20 * time.Second, 40, 8, failsWith(gen.ErrTimeout, "transfer")},
		// As kvtransfer's receiver: the room fails at the REGISTER_ACK bound
		// (kvtransfer.DefaultHandshakeTimeout), long before the engine's transfer bound.
		{"bootstrap_stall holds the handshake until decode's REGISTER_ACK bound", pdStrict,
			scenarios.Fault{Name: "f", Type: "bootstrap_stall", Target: "prefill-0"},
			0, 0, 40 * time.Second, 40, 8, failsWith(gen.ErrTransfer, "no REGISTER_ACK within 5s")},
		{"scheduler_stall answers with the watchdog", coStrict + "\n  args: [--watchdog-timeout=2]",
			scenarios.Fault{Name: "f", Type: "scheduler_stall", Target: "colocated"},
			0, 0, 5 * time.Second, 40, 8, failsWith(gen.ErrTimeout, "watchdog")},
		{"network_partition of router->decode fails the stream", pdStrict,
			scenarios.Fault{Name: "f", Type: "network_partition", Target: "router->decode-0"},
			30 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(nil, "connection reset")},
		{"connection_reset resets the decode leg", pdStrict,
			scenarios.Fault{Name: "f", Type: "connection_reset", Target: "router->decode-0"},
			30 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(nil, "connection reset")},
		{"process_pause of decode: the router marks it down and fails the request", pdStrict,
			scenarios.Fault{Name: "f", Type: "process_pause", Target: "decode-0"},
			30 * time.Millisecond, 0, 10 * time.Second, 40, 400, failsWith(gen.ErrUnavailable, "became unhealthy")},
		{"process_restart of decode fails the stream", pdStrict,
			scenarios.Fault{Name: "f", Type: "process_restart", Target: "decode-0"},
			30 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(nil, "")},
		{"bandwidth_limit on the KV link stretches the transfer past its bound", pdStrict,
			scenarios.Fault{Name: "f", Type: "bandwidth_limit", Target: "prefill-0->decode-0", Params: map[string]any{"rate": 1}},
			0, 0, 30 * time.Second, 300, 8, failsWith(gen.ErrTimeout, "transfer")},
		{"process_pause of prefill: the router marks it down before decode has the KV", pdStrict,
			scenarios.Fault{Name: "f", Type: "process_pause", Target: "prefill-0"},
			0, 0, 10 * time.Second, 40, 8, failsWith(gen.ErrUnavailable, "prefill prefill-0 became unhealthy")},
		{"network_partition of the KV link fails the transfer explicitly", pdStrict,
			scenarios.Fault{Name: "f", Type: "network_partition", Target: "prefill-0->decode-0"},
			0, 0, 2 * time.Second, 40, 8, failsWith(gen.ErrTransfer, "connection refused")},
		{"process_kill of the colocated server resets the client's stream", coStrict,
			scenarios.Fault{Name: "f", Type: "process_kill", Target: "colocated"},
			10 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(ErrConnReset, "colocated")},
		{"process_kill of the router resets the client's stream", pdStrict,
			scenarios.Fault{Name: "f", Type: "process_kill", Target: "router"},
			30 * time.Millisecond, 0, 2 * time.Second, 40, 400, failsWith(nil, "connection reset")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv, _ := runFault(t, tc.ref, tc.fault, tc.at, tc.until, tc.end, tc.prompt, tc.maxToken)
			tc.check(t, s, srv)
		})
	}
}

func TestKVStallHoldsTheTransferStage(t *testing.T) {
	loop, srv := build(t, pdStrict)
	stop, err := srv.Fault(scenarios.Fault{Name: "f", Type: "kv_transfer_stall", Target: "prefill-0"})
	require.NoError(t, err)
	s := submit(loop, srv, "r", 40, 8)
	loop.RunUntil(Epoch.Add(2 * time.Second))
	reqs := srv.Requests()
	require.Len(t, reqs["decode-0"], 1)
	assert.Equal(t, "transfer", reqs["decode-0"][0].Stage)
	require.Len(t, reqs["prefill-0"], 1)
	assert.Equal(t, "inflight", reqs["prefill-0"][0].Stage)
	assert.Equal(t, 1.0, srv.Gauges()["decode-0"]["sglang:num_decode_transfer_queue_reqs"], "strict gauges are live")
	stop() // the held frames go out: the request completes
	loop.RunUntil(Epoch.Add(4 * time.Second))
	require.NotNil(t, s.done)
	assert.NoError(t, s.done.Err)
}

func TestPausedPrefillKVConnectionDiesOfSilence(t *testing.T) {
	// sglang semantics, no abort-on-unhealthy: only the KV heartbeats notice the pause.
	loop, srv := build(t, pdSGLang+"\n  router_args: [--abort-on-unhealthy=false]")
	s := submit(loop, srv, "r", 40, 400)
	loop.RunUntil(Epoch.Add(30 * time.Millisecond))
	require.Nil(t, s.done)
	_, err := srv.Fault(scenarios.Fault{Name: "f", Type: "process_pause", Target: "prefill-0"})
	require.NoError(t, err)
	s2 := submit(loop, srv, "r2", 40, 8) // routed before the router marks prefill down
	require.NoError(t, s2.err)
	loop.RunUntil(Epoch.Add(8 * time.Second))
	require.NotNil(t, s2.done)
	require.Error(t, s2.done.Err)
	assert.Contains(t, s2.done.Err.Error(), "nothing from prefill-0 for 5s (heartbeats lost)", "decode declared the KV connection dead after the idle timeout")
	require.NotNil(t, s.done, "the first request had its KV: it completes")
	assert.NoError(t, s.done.Err)
}

func TestAdmitFailpointRefuses(t *testing.T) {
	loop, srv := build(t, coStrict)
	stop, err := srv.Fault(scenarios.Fault{Name: "f", Type: "failpoint", Target: "colocated",
		Params: map[string]any{"name": "engine/admit", "terms": "1*return(overloaded)"}})
	require.NoError(t, err)
	defer stop()
	s := submit(loop, srv, "a", 20, 4)
	assert.ErrorIs(t, s.err, gen.ErrOverloaded)
	s = submit(loop, srv, "b", 20, 4) // the count is spent
	require.NoError(t, s.err)
	loop.RunUntil(Epoch.Add(time.Second))
	require.NotNil(t, s.done)
	assert.NoError(t, s.done.Err)
}

func TestLatencyDelaysTheFirstToken(t *testing.T) {
	base, _, _ := runFault(t, pdStrict, scenarios.Fault{Name: "f", Type: "network_latency", Target: "router->prefill-0",
		Params: map[string]any{"latency": "1ms"}}, 10*time.Second, 0, 5*time.Second, 40, 8)
	slow, _, _ := runFault(t, pdStrict, scenarios.Fault{Name: "f", Type: "network_latency", Target: "router->decode-0",
		Params: map[string]any{"latency": "200ms"}}, 0, 0, 5*time.Second, 40, 8)
	require.NotNil(t, base.done)
	require.NotNil(t, slow.done)
	require.NoError(t, slow.done.Err)
	assert.GreaterOrEqual(t, slow.firstAt.Sub(base.firstAt), 200*time.Millisecond)
}

func TestStrictPartitionRecoversAfterRevert(t *testing.T) {
	loop, srv := build(t, pdStrict)
	stop, err := srv.Fault(scenarios.Fault{Name: "p", Type: "network_partition", Target: "router->decode-0"})
	require.NoError(t, err)
	loop.RunUntil(Epoch.Add(5 * time.Second))
	s := submit(loop, srv, "during", 20, 4)
	require.Error(t, s.err, "the router marked decode down")
	assert.ErrorIs(t, s.err, gen.ErrUnavailable)
	stop()
	loop.RunUntil(Epoch.Add(10 * time.Second))
	s = submit(loop, srv, "after", 20, 4)
	require.NoError(t, s.err)
	loop.RunUntil(Epoch.Add(12 * time.Second))
	require.NotNil(t, s.done)
	assert.NoError(t, s.done.Err)
}

func TestCanModel(t *testing.T) {
	_, srv := build(t, pdStrict)
	for _, tc := range []struct {
		name string
		f    scenarios.Fault
		want error
	}{
		{"client_disconnect is the harness's", scenarios.Fault{Name: "f", Type: "client_disconnect", Target: "client"}, nil},
		{"queue_saturation is the harness's", scenarios.Fault{Name: "f", Type: "queue_saturation", Target: "client"}, nil},
		{"a slicer toxic is not modelled", scenarios.Fault{Name: "f", Type: "network_toxic", Target: "router->decode-0",
			Params: map[string]any{"toxic": "slicer"}}, ErrNotModelled},
		{"engine/admit is modelled", scenarios.Fault{Name: "f", Type: "failpoint", Target: "decode-0",
			Params: map[string]any{"name": "engine/admit", "terms": "return(overloaded)"}}, nil},
		{"an unknown failpoint is not modelled", scenarios.Fault{Name: "f", Type: "failpoint", Target: "decode-0",
			Params: map[string]any{"name": "api/write", "terms": "return(x)"}}, ErrNotModelled},
		{"decode_crash on prefill is wrong", scenarios.Fault{Name: "f", Type: "decode_crash", Target: "prefill-0"}, errors.New("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := srv.CanModel(tc.f)
			switch {
			case tc.want == nil:
				assert.NoError(t, err)
			case errors.Is(tc.want, ErrNotModelled):
				assert.ErrorIs(t, err, ErrNotModelled)
			default:
				assert.Error(t, err)
			}
		})
	}
	_, err := srv.Fault(scenarios.Fault{Name: "f", Type: "client_disconnect", Target: "client"})
	assert.ErrorIs(t, err, ErrClientSide)
}

func TestExternalTargetIsRefused(t *testing.T) {
	sc, err := scenarios.Parse("t.yaml", []byte("name: t\nduration: 5s\ntarget:\n  url: http://127.0.0.1:1\nworkloads:\n  - type: burst\n    count: 1\n"))
	require.NoError(t, err)
	_, err = NewTopology(NewLoop(Epoch), sc)
	assert.ErrorIs(t, err, ErrNotModelled)
}

// trace runs a small PD scenario with a fault and returns every client-visible event.
func trace(t *testing.T) string {
	loop, srv := build(t, pdStrict+"\n  args: [--max-running-requests=4]")
	var b strings.Builder
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("r%d", i)
		loop.At(Epoch.Add(time.Duration(i)*7*time.Millisecond), func() {
			_, err := srv.Submit(&gen.Request{ID: id, Prompt: prompt(30+i*5, i), MaxTokens: 20 + i, Sampling: kernels.Sampling{Temperature: 0.8, Seed: uint64(i)}},
				func(ev gen.Event) {
					fmt.Fprintf(&b, "%d %s %v %v %s %v\n", loop.Now().Sub(Epoch), id, ev.Tokens, ev.Done, ev.Finish, ev.Err)
				})
			fmt.Fprintf(&b, "%d submit %s %v\n", loop.Now().Sub(Epoch), id, err)
		})
	}
	loop.At(Epoch.Add(40*time.Millisecond), func() {
		_, err := srv.Fault(scenarios.Fault{Name: "l", Type: "network_latency", Target: "router->decode-0",
			Params: map[string]any{"latency": "5ms", "jitter": "4ms"}})
		require.NoError(t, err)
	})
	loop.RunUntil(Epoch.Add(3 * time.Second))
	fmt.Fprintf(&b, "steps %d\n", loop.Steps())
	return b.String()
}

func TestDeterministic(t *testing.T) {
	a, b := trace(t), trace(t)
	require.Contains(t, a, "true length")
	assert.Equal(t, a, b)
}

func TestEveryShippedScenarioBuildsAndItsFaultsAreModelled(t *testing.T) {
	for _, info := range scenarios.List() {
		t.Run(info.Name, func(t *testing.T) {
			sc, err := scenarios.Load(info.Name, scenarios.WithFaultTypes(chaos.FaultTypes()))
			require.NoError(t, err)
			srv, err := NewTopology(NewLoop(Epoch), sc)
			if !sc.Embedded() {
				assert.ErrorIs(t, err, ErrNotModelled)
				return
			}
			require.NoError(t, err)
			for _, f := range sc.Faults {
				assert.NoError(t, srv.CanModel(f), "fault %s (%s)", f.Name, f.Type)
			}
		})
	}
}

func TestBootstrapRetryEveryStepFreezesDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		args string
		bug  bool
	}{
		{"with the bug the transfers wait", "\n  decode_args: [--sglang-bug=bootstrap-retry-every-step]", true},
		{"without it they fail at once", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loop, srv := build(t, pdSGLang+tc.args)
			stop, err := srv.Fault(scenarios.Fault{Name: "p", Type: "network_partition", Target: "prefill-0->decode-0"})
			require.NoError(t, err)
			var ss []*stream
			for i := 0; i < 8; i++ {
				loop.At(Epoch.Add(time.Duration(i)*250*time.Millisecond), func() {
					ss = append(ss, submit(loop, srv, fmt.Sprintf("r%d", i), 30, 4))
				})
			}
			loop.RunUntil(Epoch.Add(2500 * time.Millisecond))
			ended := 0
			for _, s := range ss {
				require.NoError(t, s.err)
				if s.done != nil {
					ended++
					assert.ErrorIs(t, s.done.Err, gen.ErrTransfer)
				}
			}
			if !tc.bug {
				assert.Positive(t, ended, "explicit transfer errors")
				stop()
				return
			}
			assert.Zero(t, ended, "nothing ends while decode retries")
			stages := map[string]int{}
			for _, ri := range srv.Requests()["decode-0"] {
				stages[ri.Stage]++
			}
			assert.Positive(t, stages["transfer"], "held in decode's transfer stage: %v", stages)
			stop()
			loop.RunUntil(Epoch.Add(10 * time.Second))
			for _, s := range ss {
				require.NotNil(t, s.done)
				assert.NoError(t, s.done.Err, "the transfers start once prefill answers")
			}
		})
	}
}
