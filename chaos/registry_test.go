package chaos

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

func TestValidateSpec(t *testing.T) {
	targets := []string{"router", "prefill-0", "decode-0", "prefill", "decode", "router->decode-0", "prefill-0->decode-0", "client"}
	tests := []struct {
		name string
		spec scenarios.Fault
		want string // "" for valid
	}{
		{"valid", scenarios.Fault{Name: "a", Type: "decode_crash", Target: "decode-0"}, ""},
		{"valid with params", scenarios.Fault{Name: "a", Type: "network_latency", Target: "router->decode-0", Params: map[string]any{"latency": "300ms", "jitter": 20}}, ""},
		{"unknown type", scenarios.Fault{Name: "a", Type: "meteor_strike", Target: "decode-0"}, `unknown fault type "meteor_strike" (known: bandwidth_limit`},
		{"missing type", scenarios.Fault{Name: "a", Target: "decode-0"}, "type must be set"},
		{"missing target", scenarios.Fault{Name: "a", Type: "decode_crash"}, "target must be set (one of: router, prefill-0"},
		{"target does not exist", scenarios.Fault{Name: "a", Type: "decode_crash", Target: "decode-7"}, `target "decode-7" does not exist (have: router`},
		{"unknown param", scenarios.Fault{Name: "a", Type: "decode_crash", Target: "decode-0", Params: map[string]any{"restrat": true}}, "params.restrat: unknown param (known: restart)"},
		{"param takes none", scenarios.Fault{Name: "a", Type: "process_pause", Target: "decode-0", Params: map[string]any{"x": 1}}, "this fault takes none"},
		{"bad duration", scenarios.Fault{Name: "a", Type: "network_latency", Target: "router->decode-0", Params: map[string]any{"latency": "soon"}}, `params.latency: invalid duration "soon"`},
		{"bad choice", scenarios.Fault{Name: "a", Type: "scheduler_stall", Target: "decode-0", Params: map[string]any{"mode": "nap"}}, "params.mode: must be one of pause, sleep"},
		{"out of range", scenarios.Fault{Name: "a", Type: "kv_transfer_drop", Target: "prefill-0", Params: map[string]any{"probability": 150}}, "params.probability: must be in [0, 100]"},
		{"not an integer", scenarios.Fault{Name: "a", Type: "queue_saturation", Target: "client", Params: map[string]any{"requests": 1.5}}, "params.requests: must be an integer"},
		{"wrong type", scenarios.Fault{Name: "a", Type: "decode_crash", Target: "decode-0", Params: map[string]any{"restart": "yes"}}, "params.restart: must be true or false"},
		{"generic failpoint bad terms", scenarios.Fault{Name: "a", Type: "failpoint", Target: "decode-0", Params: map[string]any{"name": "engine/step", "terms": "explode"}}, "params.terms"},
		{"generic failpoint no name", scenarios.Fault{Name: "a", Type: "failpoint", Target: "decode-0", Params: map[string]any{"terms": "pause"}}, "params.name"},
		{"network_toxic unknown toxic", scenarios.Fault{Name: "a", Type: "network_toxic", Target: "router->decode-0", Params: map[string]any{"toxic": "fire"}}, "params.toxic"},
		{"network_toxic bad attribute", scenarios.Fault{Name: "a", Type: "network_toxic", Target: "router->decode-0", Params: map[string]any{"toxic": "latency", "latency": "x"}}, "params.latency"},
		{"toxicity 0", scenarios.Fault{Name: "a", Type: "network_latency", Target: "router->decode-0", Params: map[string]any{"toxicity": 0}}, "params.toxicity: must be a share of connections in (0, 1], got 0 (0 puts the toxic on none)"},
		{"network_toxic toxicity 0", scenarios.Fault{Name: "a", Type: "network_toxic", Target: "router->decode-0", Params: map[string]any{"toxic": "latency", "toxicity": 0.0}}, "params.toxicity: must be a share of connections in (0, 1]"},
		{"toxicity too small for the proxy", scenarios.Fault{Name: "a", Type: "connection_reset", Target: "router->decode-0", Params: map[string]any{"toxicity": 1e-50}}, "params.toxicity: must be"},
		{"toxicity above 1", scenarios.Fault{Name: "a", Type: "bandwidth_limit", Target: "router->decode-0", Params: map[string]any{"toxicity": 1.5}}, "params.toxicity: must be a share of connections in (0, 1], got 1.5"},
		{"toxicity NaN", scenarios.Fault{Name: "a", Type: "network_latency", Target: "router->decode-0", Params: map[string]any{"toxicity": "NaN"}}, "params.toxicity: must be a share of connections in (0, 1], got NaN"},
		{"min_usage NaN", scenarios.Fault{Name: "a", Type: "kv_pool_exhaustion", Target: "decode-0", Params: map[string]any{"min_usage": math.NaN()}}, "params.min_usage: must be a number, got NaN"},
		{"probability .nan as text", scenarios.Fault{Name: "a", Type: "kv_transfer_drop", Target: "prefill-0", Params: map[string]any{"probability": "nan"}}, "params.probability: must be a number, got nan"},
		{"toxic attribute Inf", scenarios.Fault{Name: "a", Type: "network_toxic", Target: "router->decode-0", Params: map[string]any{"toxic": "latency", "latency": math.Inf(1)}}, "params.latency: toxic attributes must be non-negative numbers"},
		{"valid toxicity", scenarios.Fault{Name: "a", Type: "network_latency", Target: "router->decode-0", Params: map[string]any{"toxicity": 0.5}}, ""},
		{"disconnect nothing", scenarios.Fault{Name: "a", Type: "client_disconnect", Target: "client", Params: map[string]any{"fraction": 0}}, "cancels nothing"},
		{"negative at", scenarios.Fault{Name: "a", Type: "decode_crash", Target: "decode-0", At: -1}, "at and for"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateSpec(tc.spec, targets)
			if tc.want == "" {
				require.NoError(t, err, "ValidateSpec =")
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ValidateSpec = %v, want error containing %q", err, tc.want)
			}
			assert.ErrorIs(t, err, ErrBadSpec, "error does not wrap ErrBadSpec")
		})
	}
	// nil targets skip the target check.
	if err := ValidateSpec(scenarios.Fault{Name: "a", Type: "decode_crash", Target: "anything"}, nil); err != nil {
		t.Errorf("nil targets: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	if _, err := New(scenarios.Fault{Name: "x", Type: "nope"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("New unknown = %v", err)
	}
	ft := FaultTypes()
	if len(ft) != len(KnownTypes()) || len(ft) != len(Types()) {
		t.Fatal("FaultTypes, KnownTypes and Types disagree")
	}
	if ft["network_partition"].Targets != scenarios.TargetLink || ft["decode_crash"].Targets != scenarios.TargetProcess {
		t.Fatal("target kinds wrong")
	}
	if err := ft["decode_crash"].Check(scenarios.Fault{Params: map[string]any{"bogus": 1}}); err == nil {
		t.Fatal("Check accepted an unknown param")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("duplicate Register did not panic")
			}
		}()
		Register(Type{Name: "decode_crash", New: func(scenarios.Fault) (Fault, error) { return nil, nil }})
	}()
}

// TestScenarioValidationUsesRegistry runs a real scenario through the scenarios
// validator with this registry: a fault on a missing target and an unknown type fail
// with clear messages.
func TestScenarioValidationUsesRegistry(t *testing.T) {
	src := `
name: v
duration: 30s
reference: {prefill: 1, decode: 1}
workloads:
  - name: agents
    type: agents
    agents: 2
faults:
  - {name: a, type: decode_crash, target: decode-3, at: 1s, for: 2s}
  - {name: b, type: meteor_strike, target: decode-0, at: 1s}
  - {name: c, type: network_partition, target: decode-0, at: 1s}
  - {name: d, type: process_pause, target: decode-0, at: 1s, for: 1s}
`
	sc, err := scenarios.Parse("v.yaml", []byte(src), scenarios.WithFaultTypes(FaultTypes()))
	if err == nil {
		t.Fatalf("scenario validated: %+v", sc)
	}
	msg := err.Error()
	for _, want := range []string{`"decode-3" does not exist`, `unknown fault type "meteor_strike"`, "needs a link target"} {
		if !strings.Contains(msg, want) {
			t.Errorf("validation message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "faults[3]") {
		t.Errorf("valid fault d reported:\n%s", msg)
	}
}
