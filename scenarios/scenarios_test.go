package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const minimal = `name: t
workloads:
  - type: agents
`

func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	var ps Problems
	require.ErrorAs(t, err, &ps)
	return ps
}

// requireProblems checks that err holds exactly the wanted problems, each given as a
// prefix of its "file:line: path: msg" line.
func requireProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	require.Error(t, err, "want problems, got none")
	lines := problemsOf(t, err).Lines()
	all := strings.Join(lines, "\n")
	assert.Len(t, lines, len(want), "problems:\n%s", all)
	for _, w := range want {
		assert.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }),
			"missing problem %q in:\n%s", w, all)
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		opts []Option
		want []string // each a full "file:line: path: msg" prefix
	}{
		{
			name: "unknown key with suggestion",
			yaml: "name: t\nworkloads:\n  - type: agents\n    agnets: 3\n",
			want: []string{`t.yaml:4: workloads[0].agnets: unknown field (did you mean "agents"?)`},
		},
		{
			name: "netns needs a PD topology",
			yaml: "name: t\nreference:\n  prefill: 0\n  decode: 0\n  netns: true\nworkloads:\n  - type: agents\n",
			want: []string{"t.yaml:5: reference.netns: needs a PD topology"},
		},
		{
			name: "netns_prefix without netns",
			yaml: "name: t\nreference:\n  netns_prefix: pdx\nworkloads:\n  - type: agents\n",
			want: []string{"t.yaml:3: reference.netns_prefix: is set but reference.netns is false"},
		},
		{
			name: "unknown top-level key",
			yaml: "name: t\nbogus: 1\nworkloads:\n  - type: agents\n",
			want: []string{"t.yaml:2: bogus: unknown field"},
		},
		{
			name: "wrong types all reported",
			yaml: "name: t\nseed: x\nduration: 5 seconds\nworkloads:\n  - type: agents\n    turns: abc\n    stream: maybe\n",
			want: []string{
				`t.yaml:2: seed: must be an integer, got "x"`,
				`t.yaml:3: duration: invalid duration "5 seconds"`,
				`t.yaml:6: workloads[0].turns: must be an integer, got "abc"`,
				`t.yaml:7: workloads[0].stream: must be true or false, got "maybe"`,
			},
		},
		{
			name: "duplicate key",
			yaml: "name: t\nname: u\nworkloads:\n  - type: agents\n",
			want: []string{"t.yaml:2: name: duplicate key"},
		},
		{
			name: "syntax error has a line",
			yaml: "name: t\nworkloads: [\n",
			want: []string{"t.yaml:2: YAML syntax:"},
		},
		{
			name: "not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"t.yaml:1: a scenario must be a YAML mapping"},
		},
		{
			name: "empty",
			yaml: "",
			want: []string{"t.yaml: empty scenario"},
		},
		{
			name: "validation: every problem at once",
			yaml: "name: t\nworkloads:\n  - type: agents\n    agents: 0\n  - type: open_loop\n  - type: burst\n    count: 0\ndeadlines:\n  stall: 40s\n  total: 10s\n",
			want: []string{
				"t.yaml:4: workloads[0].agents: must be ≥ 1",
				"t.yaml:5: workloads[1].pacer: open_loop needs a pacer",
				"t.yaml:7: workloads[2].count: must be ≥ 1",
				"t.yaml:9: deadlines.stall: (40s) must not exceed deadlines.total (10s)",
			},
		},
		{
			name: "field on the wrong workload type",
			yaml: "name: t\nworkloads:\n  - type: burst\n    count: 3\n    agents: 4\n",
			want: []string{"t.yaml:5: workloads[0].agents: only applies to type agents, not burst"},
		},
		{
			name: "retries and restart only for agents",
			yaml: "name: t\nworkloads:\n  - type: burst\n    count: 3\n    retries: 2\n    restart: true\n",
			want: []string{
				"t.yaml:5: workloads[0].retries: only applies to type agents, not burst",
				"t.yaml:6: workloads[0].restart: only applies to type agents, not burst",
			},
		},
		{
			name: "retries out of range",
			yaml: "name: t\nworkloads:\n  - type: agents\n    retries: -1\n  - type: agents\n    retries: 101\n",
			want: []string{
				"t.yaml:4: workloads[0].retries: must be ≥ 0",
				"t.yaml:6: workloads[1].retries: must be ≤ 100",
			},
		},
		{
			name: "restart needs a turn limit",
			yaml: "name: t\nworkloads:\n  - type: agents\n    turns: 0\n    restart: true\n",
			want: []string{"t.yaml:5: workloads[0].restart: needs turns ≥ 1 (turns 0 already runs until the window ends)"},
		},
		{
			name: "bad enum values",
			yaml: "name: t\nreference:\n  backend: gpu\n  semantics: lax\nworkloads:\n  - type: agentz\n    endpoint: embeddings\n",
			want: []string{
				`t.yaml:3: reference.backend: must be tinyref, simtime or paced, got "gpu"`,
				`t.yaml:4: reference.semantics: must be strict or sglang, got "lax"`,
				`t.yaml:6: workloads[0].type: must be agents, open_loop, burst, probe or trace, got "agentz"`,
				`t.yaml:7: workloads[0].endpoint: must be chat or completions, got "embeddings"`,
			},
		},
		{
			name: "bad assertion",
			yaml: "name: t\nworkloads:\n  - type: agents\nassertions: [no_silent_drops, p99(ttfb) < 2s]\n",
			want: []string{`t.yaml:4: assertions[1]: assertion "p99(ttfb) < 2s": p99() takes ttft, itl or e2e`},
		},
		{
			name: "no_leaks needs metrics on an external target",
			yaml: "name: t\ntarget:\n  url: http://127.0.0.1:1\nworkloads:\n  - type: agents\nassertions: [no_leaks]\n",
			want: []string{"t.yaml:6: assertions[0]: no_leaks cannot be evaluated: an external target has no metrics endpoint unless target.metrics_url"},
		},
		{
			name: "no_leaks needs metrics on a launched target",
			yaml: "name: t\ntarget:\n  url: http://127.0.0.1:1\n  launch:\n    - {name: sglang, role: colocated, command: [sglang]}\nworkloads:\n  - type: agents\nassertions:\n  - no_silent_drops\n  - no_leaks\n",
			want: []string{"t.yaml:10: assertions[1]: no_leaks cannot be evaluated"},
		},
		{
			name: "recovery needs a fault",
			yaml: "name: t\nworkloads:\n  - type: agents\nassertions:\n  - no_silent_drops\n  - recovery\n",
			want: []string{"t.yaml:6: assertions[1]: recovery cannot be evaluated: the scenario injects no fault"},
		},
		{
			name: "recovery needs a fault within the duration",
			yaml: "name: t\nduration: 10s\nworkloads:\n  - type: agents\nfault_timeline: {cover: repeat}\nfaults:\n  - {type: decode_crash, target: decode, at: 8s, for: 5s}\nassertions: [recovery]\n",
			want: []string{"t.yaml:8: assertions[0]: recovery cannot be evaluated: no fault ends before the end of load (duration 10s)"},
		},
		{
			name: "threshold over an unknown outcome points at its line",
			yaml: "name: t\nworkloads:\n  - type: agents\nassertions:\n  - no_silent_drops\n  - rate(invlid) < 0.1\n",
			want: []string{`t.yaml:6: assertions[1]: assertion "rate(invlid) < 0.1":`},
		},
		{
			name: "fault target does not exist",
			yaml: "name: t\nworkloads:\n  - type: agents\nfaults:\n  - type: decode_crash\n    target: decode-7\n    at: 5s\n",
			want: []string{`t.yaml:6: faults[0].target: "decode-7" does not exist in this topology (valid targets: agents-0, client, decode-0, prefill-0, prefill-0->decode-0, router, router->decode-0, router->prefill-0)`},
		},
		{
			name: "unknown fault type",
			yaml: "name: t\nworkloads:\n  - type: agents\nfaults:\n  - type: meteor\n    target: decode\n",
			opts: []Option{WithKnownFaults("decode_crash", "network_partition")},
			want: []string{`t.yaml:5: faults[0].type: unknown fault type "meteor" (known: decode_crash, network_partition)`},
		},
		{
			name: "unknown fault type with a suggestion",
			yaml: "name: t\nworkloads:\n  - type: agents\nfaults:\n  - type: decode_crsh\n    target: decode\n",
			opts: []Option{WithKnownFaults("decode_crash", "network_partition")},
			want: []string{`t.yaml:5: faults[0].type: unknown fault type "decode_crsh" (did you mean "decode_crash"? known: decode_crash, network_partition)`},
		},
		{
			name: "tab in indentation",
			yaml: "name: t\nworkloads:\n\t- type: agents\n",
			want: []string{"t.yaml:3: " + tabHint},
		},
		{
			name: "tab in indentation reported a line early by the parser",
			yaml: "name: t\nworkloads:\n  - type: agents\n\t  agents: 3\n",
			want: []string{"t.yaml:4: " + tabHint},
		},
		{
			name: "unknown cover",
			yaml: "name: t\nworkloads:\n  - type: agents\nfault_timeline:\n  cover: repaet\n",
			want: []string{`t.yaml:5: fault_timeline.cover: must be fixed, repeat or scale, got "repaet" (did you mean "repeat"?)`},
		},
		{
			name: "forensics wedge bound below a second",
			yaml: "name: t\nworkloads:\n  - type: agents\nforensics:\n  wedged_after: 500ms\n",
			want: []string{"t.yaml:5: forensics.wedged_after: must be 0 (off) or at least 1s, got 500ms"},
		},
		{
			name: "forensics wedge bound negative",
			yaml: "name: t\nworkloads:\n  - type: agents\nforensics: {wedged_after: -1s}\n",
			want: []string{"t.yaml:4: forensics.wedged_after: must be 0 (off) or at least 1s, got -1s"},
		},
		{
			name: "period with a fixed timeline",
			yaml: "name: t\nworkloads:\n  - type: agents\nfault_timeline:\n  period: 1m\n",
			want: []string{"t.yaml:5: fault_timeline.period: only applies with cover: repeat or scale"},
		},
		{
			name: "repeat needs every fault to end, within the period, without '#'",
			yaml: "name: t\nworkloads:\n  - type: agents\nfault_timeline: {cover: repeat, period: 20s}\nfaults:\n" +
				"  - {name: held, type: decode_crash, target: decode, at: 1s}\n" +
				"  - {name: long, type: decode_crash, target: decode, at: 10s, for: 15s}\n" +
				"  - {name: a#1, type: decode_crash, target: decode, at: 1s, for: 1s}\n",
			want: []string{
				"t.yaml:6: faults[0].for: must be > 0 with cover: repeat",
				"t.yaml:7: faults[1].for: at + for (25s) exceeds fault_timeline.period (20s)",
				"t.yaml:8: faults[2].name: must not contain '#'",
			},
		},
		{
			name: "repeat with too many injections",
			yaml: "name: t\nduration: 1h\nworkloads:\n  - type: agents\nfault_timeline: {cover: repeat, period: 100ms}\nfaults:\n  - {type: decode_crash, target: decode, at: 0s, for: 10ms}\n",
			want: []string{"t.yaml:5: fault_timeline.period: repeating every 100ms over 1h0m0s makes more than 10000 injections"},
		},
		{
			name: "scale needs faults within the period",
			yaml: "name: t\nworkloads:\n  - type: agents\nfault_timeline: {cover: scale, period: 20s}\nfaults:\n  - {type: decode_crash, target: decode, at: 20s}\n  - {type: decode_crash, target: decode, at: 5s, for: 20s}\n",
			want: []string{
				"t.yaml:6: faults[0].at: (20s) must be before the end of fault_timeline.period (20s)",
				"t.yaml:7: faults[1].for: at + for (25s) exceeds fault_timeline.period (20s)",
			},
		},
		{
			name: "problems inside an anchor point at the entry that uses it",
			yaml: "name: t\nduration: 30s\nworkloads:\n  - &cohort\n    type: agents\n    duration: 20s\n  - {<<: *cohort, name: b, start: 20s}\n  - <<: *cohort\n    name: c\n    start: 25s\n",
			want: []string{
				"t.yaml:7: workloads[1].duration: start + duration (40s) exceeds the scenario's duration (30s) (set by anchor &cohort, line 6)",
				"t.yaml:8: workloads[2].duration: start + duration (45s) exceeds the scenario's duration (30s) (set by anchor &cohort, line 6)",
			},
		},
		{
			name: "type errors inside an anchor point at each alias",
			yaml: "name: t\nworkloads:\n  - &w {type: agents, agents: many}\n  - *w\n  - {<<: *w, name: x}\n",
			want: []string{
				`t.yaml:3: workloads[0].agents: must be an integer, got "many"`,
				`t.yaml:4: workloads[1].agents: must be an integer, got "many" (from anchor &w, line 3)`,
				`t.yaml:5: workloads[2].agents: must be an integer, got "many" (from anchor &w, line 3)`,
			},
		},
		{
			name: "fault target of the wrong kind",
			yaml: "name: t\nworkloads:\n  - type: agents\nfaults:\n  - type: network_partition\n    target: decode-0\n",
			opts: []Option{WithFaultTypes(map[string]FaultType{"network_partition": {Targets: TargetLink}})},
			want: []string{`t.yaml:6: faults[0].target: fault type network_partition needs a link target, and "decode-0" is a process`},
		},
		{
			name: "fault params checked by the registry",
			yaml: "name: t\nworkloads:\n  - type: agents\nfaults:\n  - type: network_latency\n    target: router->decode\n    params: {latency: fast}\n",
			opts: []Option{WithFaultTypes(map[string]FaultType{"network_latency": {Targets: TargetLink, Check: func(f Fault) error {
				if _, err := ParseDuration(f.Params["latency"].(string)); err != nil {
					return errors.New("latency must be a duration")
				}
				return nil
			}}})},
			want: []string{"t.yaml:7: faults[0].params: latency must be a duration"},
		},
		{
			name: "fault after the end of load",
			yaml: "name: t\nduration: 10s\nworkloads:\n  - type: agents\nfaults:\n  - type: decode_crash\n    target: decode\n    at: 8s\n    for: 5s\n",
			want: []string{"t.yaml:9: faults[0].for: at + for (13s) exceeds the scenario's duration (10s)"},
		},
		{
			// NaN compares false with every bound, so it slipped past them all: the plan
			// showed "NaN req/s" and ~-9223372036854775808 requests.
			name: "NaN and infinite numbers",
			yaml: "name: t\nworkloads:\n  - type: open_loop\n    temperature: .nan\n    pacer: {type: constant, rate: .NaN}\n  - type: trace\n    trace: {file: traces/azure-conv.csv, speedup: .inf}\n",
			want: []string{
				"t.yaml:4: workloads[0].temperature: must be a finite number, got \".nan\"",
				"t.yaml:5: workloads[0].pacer.rate: must be a finite number, got \".NaN\"",
				"t.yaml:7: workloads[1].trace.speedup: must be a finite number, got \".inf\"",
			},
		},
		{
			// Two such durations summed overflowed time.Duration: plan put the drain
			// deadline at +-1124095h34m33.71s.
			name: "absurd durations",
			yaml: "name: t\nduration: 2000000h\ndrain: {timeout: 2000000h}\nworkloads:\n  - type: agents\n",
			want: []string{
				`t.yaml:2: duration: duration "2000000h" is more than a year (8760h)`,
				`t.yaml:3: drain.timeout: duration "2000000h" is more than a year (8760h)`,
			},
		},
		{
			name: "absurd --duration override",
			yaml: "name: t\nworkloads:\n  - type: agents\n",
			opts: []Option{WithOverrides(func(sc *Scenario) { sc.Duration = Duration(2000000 * time.Hour) })},
			want: []string{"t.yaml: duration: must be at most 8760h (a year), got 2000000h0m0s"},
		},
		{
			// They were ignored: the run's arrivals were not what the file said.
			name: "pacer fields of another pacer type",
			yaml: "name: t\nworkloads:\n  - type: open_loop\n    pacer:\n      type: constant\n      rate: 5\n      slope: 3\n      amplitude: 2\n      period: 5s\n  - type: open_loop\n    pacer: {type: sine, rate: 5, amplitude: 1, period: 4s, slope: 1}\n",
			want: []string{
				"t.yaml:7: workloads[0].pacer.slope: only applies to a linear pacer, not constant",
				"t.yaml:8: workloads[0].pacer.amplitude: only applies to a sine pacer, not constant",
				"t.yaml:9: workloads[0].pacer.period: only applies to a sine pacer, not constant",
				"t.yaml:11: workloads[1].pacer.slope: only applies to a linear pacer, not sine",
			},
		},
		{
			// The pacer stopped once the rate reached 0 (4 requests by 1.7s, then
			// nothing for the rest of the window) and plan said ~0 requests.
			name: "linear pacer whose rate falls to 0 in its window",
			yaml: "name: t\nduration: 20s\nworkloads:\n  - type: open_loop\n    duration: 10s\n    pacer: {type: linear, rate: 5, slope: -3}\n  - type: open_loop\n    start: 10s\n    pacer: {type: linear, rate: 5, slope: -0.4}\n",
			want: []string{
				"t.yaml:6: workloads[0].pacer.slope: the rate falls to 0 req/s 1.666666666s into the workload's 10s window (rate 5 + slope -3 per second); a linear pacer stops there",
			},
		},
		{
			// Nothing to judge: the run passed whatever the server did.
			name: "empty assertions",
			yaml: "name: t\nworkloads:\n  - type: agents\nassertions: []\n",
			want: []string{"t.yaml:4: assertions: is empty, so the run would pass whatever happens; list at least one, or leave the key out for the defaults"},
		},
		{
			// Both were sent through a map: which value the server saw was left to chance.
			name: "header given twice in different case",
			yaml: "name: t\ntarget:\n  url: http://127.0.0.1:9\n  headers:\n    Authorization: a\n    authorization: b\nworkloads:\n  - type: agents\n    headers: {X-A: \"1\", x-a: \"2\"}\n",
			want: []string{
				`t.yaml:4: target.headers: Authorization is given twice ("Authorization" and "authorization"); header names ignore case`,
				`t.yaml:9: workloads[0].headers: X-A is given twice ("X-A" and "x-a"); header names ignore case`,
			},
		},
		{
			// Validated; the prompt builder's strings.Builder.Grow(n+16) overflowed and
			// panicked, and a merely huge one ran out of memory.
			name: "absurd token and byte counts",
			yaml: "name: t\nworkloads:\n  - type: agents\n    prompt_tokens: 9223372036854775807\n    max_tokens: 100000000\n    tool_result_bytes: 100000000\n",
			want: []string{
				"t.yaml:4: workloads[0].prompt_tokens: must be ≤ 16777216",
				"t.yaml:5: workloads[0].max_tokens: must be ≤ 16777216",
				"t.yaml:6: workloads[0].tool_result_bytes: must be ≤ 16777216",
			},
		},
		{
			// Said "must be > 0" of a negative one, yet took 0 as the trace's own pace.
			name: "trace speedup or rate of 0",
			yaml: "name: t\nworkloads:\n  - type: trace\n    trace: {file: traces/azure-conv.csv, speedup: 0}\n  - type: trace\n    trace: {file: traces/azure-conv.csv, rate: 0}\n",
			want: []string{
				"t.yaml:4: workloads[0].trace.speedup: must be > 0 (leave it out for the trace's own pace)",
				"t.yaml:6: workloads[1].trace.rate: must be > 0 requests per second (leave it out for the trace's own pace)",
			},
		},
		{
			// A run of the whole scenario ended "not evaluated: no itl samples" (exit 3).
			name: "itl threshold without a streamed token gap",
			yaml: "name: t\nworkloads:\n  - type: agents\n    stream: false\n  - type: burst\n    count: 2\n    max_tokens: 1\nassertions: [\"p99(itl) < 1s\", \"p99(ttft) < 1s\"]\n",
			want: []string{
				"t.yaml:8: assertions[0]: p99(itl) < 1s cannot be evaluated: no workload streams more than one token (stream: true, max_tokens ≥ 2), so there is no gap between tokens; stream one, or remove it",
			},
		},
		{
			name: "launch without url",
			yaml: "name: t\ntarget:\n  launch:\n    - name: sglang\n      role: router\n      command: []\nworkloads:\n  - type: agents\n",
			want: []string{
				"t.yaml:3: target.launch: needs target.url",
				"t.yaml:6: target.launch[0].command: must name a program",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml), tt.opts...)
			requireProblems(t, err, tt.want...)
		})
	}
}

func TestDefaults(t *testing.T) {
	sc, err := Parse("mini.yaml", []byte(minimal))
	require.NoError(t, err)
	w := sc.Workloads[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"seed", sc.Seed, int64(DefaultSeed)},
		{"duration", sc.Duration, DefaultDuration},
		{"model", sc.Target.Model, DefaultModel},
		{"prefill", sc.Reference.Prefill, 1},
		{"decode", sc.Reference.Decode, 1},
		{"backend", sc.Reference.Backend, "tinyref"},
		{"semantics", sc.Reference.Semantics, "strict"},
		{"workload name", w.Name, "agents-0"},
		{"endpoint", w.Endpoint, EndpointChat},
		{"stream", w.Stream, true},
		{"agents", w.Agents, DefaultAgents},
		{"turns", w.Turns, DefaultTurns},
		{"max_tokens", w.MaxTokens, DefaultMaxTokens},
		{"workload duration", w.Duration, DefaultDuration},
		{"total", sc.Deadlines.Total, DefaultTotal},
		{"drain", sc.Drain.Timeout, DefaultTotal + DefaultDrainExtra},
		{"assertions", strings.Join(sc.Assertions, ","), "no_silent_drops,valid_responses,explained_errors,no_leaks"},
		{"no proxies", sc.Reference.Proxies, false},
	}
	for _, c := range checks {
		assert.Equal(t, c.want, c.got, c.name)
	}
	// Explicit values win, including false and 0.
	sc, err = Parse("x.yaml", []byte("name: t\nseed: 0\nworkloads:\n  - type: agents\n    stream: false\n    turns: 0\n"))
	require.NoError(t, err)
	assert.Zero(t, sc.Seed)
	assert.False(t, sc.Workloads[0].Stream)
	assert.Zero(t, sc.Workloads[0].Turns)
	// Defaults are idempotent.
	before := *sc
	sc.ApplyDefaults()
	assert.Equal(t, before.Drain, sc.Drain)
	assert.Equal(t, before.Deadlines, sc.Deadlines)
}

// The default assertions never include one that validation would refuse: no_leaks only
// with a metrics endpoint, recovery only when a fault is injected.
func TestDefaultAssertions(t *testing.T) {
	const fault = "faults:\n  - {type: decode_crash, target: client, at: 5s, for: 5s}\n"
	tests := []struct {
		name      string
		yaml      string
		overrides func(*Scenario)
		want      string
	}{
		{"embedded", minimal, nil, "no_silent_drops,valid_responses,explained_errors,no_leaks"},
		{"embedded with a fault", minimal + fault, nil, "no_silent_drops,valid_responses,explained_errors,no_leaks,recovery"},
		{"external without metrics", minimal + "target: {url: http://127.0.0.1:1}\n", nil, "no_silent_drops,valid_responses,explained_errors"},
		{"external with metrics", minimal + "target: {url: http://127.0.0.1:1, metrics_url: http://127.0.0.1:2/metrics}\n", nil,
			"no_silent_drops,valid_responses,explained_errors,no_leaks"},
		{"launched without metrics", minimal + fault + "target:\n  url: http://127.0.0.1:1\n  launch: [{name: s, role: colocated, command: [s]}]\n", nil,
			"no_silent_drops,valid_responses,explained_errors,recovery"},
		{"--target override", minimal, func(sc *Scenario) { sc.Target.URL = "http://127.0.0.1:1" }, "no_silent_drops,valid_responses,explained_errors"},
		{"repeat with no fault in the window", minimal + "duration: 10s\nfault_timeline: {cover: repeat}\nfaults:\n  - {type: x, target: client, at: 8s, for: 5s}\n", nil,
			"no_silent_drops,valid_responses,explained_errors,no_leaks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.overrides != nil {
				opts = append(opts, WithOverrides(tt.overrides))
			}
			sc, err := Parse("d.yaml", []byte(tt.yaml), opts...)
			require.NoError(t, err)
			assert.Equal(t, tt.want, strings.Join(sc.Assertions, ","))
		})
	}
}

// --target (an override) without a metrics URL refuses a listed no_leaks before the run.
func TestOverrideRefusesNoLeaks(t *testing.T) {
	yaml := "name: t\nworkloads:\n  - type: agents\nassertions:\n  - no_leaks\n"
	_, err := Parse("o.yaml", []byte(yaml), WithOverrides(func(sc *Scenario) { sc.Target.URL = "http://127.0.0.1:1" }))
	requireProblems(t, err, "o.yaml:5: assertions[0]: no_leaks cannot be evaluated")
	_, err = Parse("o.yaml", []byte(yaml), WithOverrides(func(sc *Scenario) {
		sc.Target.URL = "http://127.0.0.1:1"
		sc.Target.MetricsURL = "http://127.0.0.1:1/metrics"
	}))
	require.NoError(t, err)
}

func TestFaultDefaults(t *testing.T) {
	sc, err := Parse("f.yaml", []byte(minimal+"faults:\n  - type: kv_transfer_stall\n    target: prefill->decode\n    at: 5s\n    for: 5s\n"))
	require.NoError(t, err)
	assert.True(t, sc.Reference.Proxies)
	assert.True(t, sc.Reference.FaultInjection)
	assert.Equal(t, "kv_transfer_stall-0", sc.Faults[0].Name)
	assert.Contains(t, sc.Assertions, "recovery")
}

func TestTopology(t *testing.T) {
	sc := &Scenario{Reference: Reference{Prefill: 2, Decode: 1}, Workloads: []Workload{{Name: "bots"}}}
	topo := sc.Topology()
	tests := []struct {
		target  string
		kind    TargetKind
		ok      bool
		members string
	}{
		{"router", TargetProcess, true, "router"},
		{"prefill", TargetProcess, true, "prefill-0,prefill-1"},
		{"decode-0", TargetProcess, true, "decode-0"},
		{"decode-1", 0, false, ""},
		{"router->decode", TargetLink, true, "router->decode-0"},
		{"prefill->decode", TargetLink, true, "prefill-0->decode-0,prefill-1->decode-0"},
		{"prefill-1->decode-0", TargetLink, true, "prefill-1->decode-0"},
		{"decode->prefill", 0, false, ""},
		{"bots", TargetWorkload, true, "bots"},
		{"client", TargetWorkload, true, "client"},
		{"", 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			k, ok := topo.Resolve(tt.target)
			assert.Equal(t, tt.kind, k)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.members, strings.Join(topo.Members(tt.target), ","))
		})
	}
	ext := &Scenario{Target: Target{URL: "http://x", Launch: []Launch{{Name: "sglang-decode", Role: "decode"}}}}
	k, ok := ext.Topology().Resolve("sglang-decode")
	assert.True(t, ok, "launch process not a target")
	assert.Equal(t, TargetProcess, k)
	_, ok = ext.Topology().Resolve("router")
	assert.False(t, ok, "external target has no embedded router")
}

func TestDurationParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"5s", 5 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"0", 0, true},
		{"5", 0, false},
		{"soon", 0, false},
		{"8760h", 8760 * time.Hour, true},
		{"8761h", 0, false},
		{"-8761h", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := ParseDuration(tt.in)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			assert.Equal(t, tt.want, d.D())
		})
	}
}

// FuzzParseDuration: any text parses or fails cleanly; a parsed duration is within
// MaxDuration and its String parses back to it.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"5s", "0", "1m30s", "-2h", "8760h", "8760h0m0.000000001s", "2562047h", "1e3s", ".5ms", "5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		require.LessOrEqual(t, d, MaxDuration)
		require.GreaterOrEqual(t, d, -MaxDuration)
		again, err := ParseDuration(d.String())
		require.NoError(t, err, "String %q does not parse back", d.String())
		require.Equal(t, d, again)
	})
}

func TestLoad(t *testing.T) {
	_, err := Load("smoke")
	require.NoError(t, err, "embedded smoke")
	_, err = Load("smoke.yaml")
	require.NoError(t, err, "embedded smoke.yaml")
	dir := t.TempDir()
	p := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(p, []byte(minimal), 0o644))
	sc, err := Load(p)
	require.NoError(t, err)
	assert.Equal(t, p, sc.File)
	_, err = Load("no-such-scenario")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = Load("../etc/passwd")
	assert.Error(t, err, "loaded a path outside")
}

// TestShippedScenarios loads every embedded scenario and checks its header comment.
func TestShippedScenarios(t *testing.T) {
	list := List()
	found := false
	for _, info := range list {
		t.Run(info.Name, func(t *testing.T) {
			sc, err := Load(info.Name)
			require.NoError(t, err)
			assert.Equal(t, info.Name, sc.Name, "name differs from file %s", info.File)
			data, _ := Embedded(info.Name)
			assert.True(t, bytes.HasPrefix(data, []byte("# ")) && bytes.Contains(data, []byte("Expected")),
				"%s lacks a header comment saying what it shows and the expected verdict", info.File)
			assert.NotEmpty(t, info.Summary)
			assert.Contains(t, []string{"PASS", "FAIL"}, info.Expected)
		})
		if info.Name == "smoke" {
			found = true
		}
	}
	assert.True(t, found, "smoke not listed")
}

// nightly-soak's fault timeline covers whatever duration it is given: a short run keeps
// the faults that fit, a long one repeats the cycle to the end.
func TestNightlySoakDurations(t *testing.T) {
	tests := []struct {
		duration   time.Duration
		injections int
		leftOut    int
		last       string
	}{
		{time.Minute, 1, 14, "saturate"},
		{10 * time.Minute, 16, 0, "saturate#2"},
		{2 * time.Hour, 199, 0, "kv-drop#14"},
	}
	for _, tt := range tests {
		t.Run(tt.duration.String(), func(t *testing.T) {
			sc, err := Load("nightly-soak", WithOverrides(func(sc *Scenario) { sc.Duration = Duration(tt.duration) }))
			require.NoError(t, err)
			require.Len(t, sc.Faults, tt.injections)
			assert.Len(t, sc.FaultsLeftOut(), tt.leftOut)
			assert.Equal(t, tt.last, sc.Faults[len(sc.Faults)-1].Name)
			names := map[string]bool{}
			for _, f := range sc.Faults {
				assert.False(t, names[f.Name], "duplicate injection %s", f.Name)
				names[f.Name] = true
				assert.LessOrEqual(t, (f.At + f.For).D(), tt.duration, "%s ends after the load", f.Name)
				assert.Positive(t, f.For.D(), "%s", f.Name)
			}
			// The last injection starts in the last cycle: no long quiet tail.
			assert.Greater(t, sc.Faults[len(sc.Faults)-1].At.D(), tt.duration-9*time.Minute)
			var buf bytes.Buffer
			require.NoError(t, Plan(sc).Write(&buf))
			assert.Contains(t, buf.String(), fmt.Sprintf("faults    15 faults repeated every 9m0s: %s", plural(tt.injections, "injection")))
		})
	}
}

func TestPlanGolden(t *testing.T) {
	sc, err := Parse("planned.yaml", []byte(`name: planned
seed: 7
duration: 60s
workloads:
  - name: agents
    type: agents
    agents: 10
    turns: 3
  - name: steady
    type: open_loop
    start: 10s
    duration: 40s
    pacer: {type: linear, rate: 2, slope: 0.5}
  - name: spike
    type: burst
    start: 30s
    count: 50
faults:
  - name: kv-stall
    type: kv_transfer_stall
    target: prefill->decode
    at: 20s
    for: 10s
    params: {mode: pause}
  - name: crash
    type: decode_crash
    target: decode
    at: 45s
`))
	require.NoError(t, err)
	tl := Plan(sc)
	assert.Equal(t, 30+480+50, tl.Requests, "expected requests")
	var buf bytes.Buffer
	require.NoError(t, tl.Write(&buf))
	golden(t, "testdata/plan.golden", buf.Bytes())
	// Plan is pure: the same scenario gives the same plan.
	var again bytes.Buffer
	require.NoError(t, Plan(sc).Write(&again))
	assert.Equal(t, buf.String(), again.String(), "plan is not deterministic")
}

// A restarting agents workload has no fixed request count: the plan says so and
// describes the restart and the retries.
func TestPlanAgentsRestart(t *testing.T) {
	tests := []struct {
		name     string
		extra    string
		requests int
		open     bool
		detail   string
	}{
		{"fixed turns", "", 30, false, "agents: 10 sessions × 3 turns, tool result 256B, chat stream, max_tokens 16, ~30 requests"},
		{"restart", "    restart: true\n", 0, true, "agents: 10 sessions × 3 turns, restarting until the window ends, tool result 256B, chat stream, max_tokens 16"},
		{"retries", "    retries: 2\n", 30, false, "agents: 10 sessions × 3 turns, tool result 256B, up to 2 retries per refused turn, chat stream, max_tokens 16, ~30 requests"},
		{"singular", "    agents: 1\n    turns: 1\n    retries: 1\n", 1, false, "agents: 1 session × 1 turn, tool result 256B, up to 1 retry per refused turn, chat stream, max_tokens 16, ~1 request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// extra's keys replace the base ones (a key given twice is a problem).
			base := map[string]string{"agents": "10", "turns": "3"}
			for _, l := range strings.Split(strings.TrimSpace(tt.extra), "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), ": "); ok {
					base[k] = v
				}
			}
			y := "name: p\nduration: 10s\nworkloads:\n  - name: a\n    type: agents\n"
			for _, k := range slices.Sorted(maps.Keys(base)) {
				y += fmt.Sprintf("    %s: %s\n", k, base[k])
			}
			sc, err := Parse("p.yaml", []byte(y))
			require.NoError(t, err)
			tl := Plan(sc)
			require.Len(t, tl.Workloads, 1)
			w := tl.Workloads[0]
			assert.Equal(t, tt.requests, w.Requests)
			assert.Equal(t, tt.open, w.Open)
			assert.True(t, slices.ContainsFunc(tl.Steps, func(s Step) bool { return s.Name == "a" && s.Detail == tt.detail }),
				"no step with detail %q in %+v", tt.detail, tl.Steps)
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update")
	assert.Equal(t, string(want), string(got), "%s differs (run with -update)", path)
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(minimal))
	for _, name := range []string{"smoke", "nightly-soak"} {
		if data, ok := Embedded(name); ok {
			f.Add(data)
		}
	}
	f.Add([]byte("name: t\nworkloads: [{type: open_loop, pacer: {type: sine, rate: 3, amplitude: 1, period: 5s}}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("workloads:\n  - &a {type: agents}\n  - {<<: *a, name: b}\n  - &c\n    <<: *c\n"))
	f.Add([]byte("faults:\n  - {type: x, target: decode, at: -5s, params: {a: [1, {b: 2}]}}\n"))
	f.Add([]byte("duration: 1h\nworkloads: [{type: burst, count: 99999999999999999999}]\n"))
	f.Add([]byte("name: t\nduration: 95s\nworkloads: [{type: agents}]\nfault_timeline: {cover: repeat, period: 30s}\nfaults: [{type: x, target: client, at: 5s, for: 10s}]\n"))
	f.Add([]byte("name: t\nduration: 1h\nworkloads: [{type: agents}]\nfault_timeline: {cover: scale}\nfaults: [{type: x, target: client, at: 5s, for: 10s}, {type: y, target: decode, at: 20s}]\n"))
	f.Add([]byte("name: t\nworkloads:\n\t- type: agents\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ps Problems
			if errors.As(err, &ps) {
				require.NotEmpty(t, ps, "empty Problems")
			}
			return
		}
		// A valid scenario always has a plan, and the plan is within bounds.
		tl := Plan(sc)
		for _, s := range tl.Steps {
			require.True(t, s.At >= 0 && s.At <= tl.Load+tl.Drain, "step %+v outside the timeline", s)
		}
		checkInjections(t, sc)
	})
}

// checkInjections checks the expanded faults of a valid scenario: within the load,
// uniquely named, bounded in number.
func checkInjections(t *testing.T, sc *Scenario) {
	t.Helper()
	require.LessOrEqual(t, len(sc.Faults), MaxInjections)
	names := map[string]bool{}
	for _, f := range sc.Faults {
		require.False(t, names[f.Name], "duplicate injection name %q", f.Name)
		names[f.Name] = true
		require.GreaterOrEqual(t, f.At, Duration(0))
		require.Less(t, f.At, sc.Duration, "%s starts after the load", f.Name)
		require.LessOrEqual(t, f.At+f.For, sc.Duration, "%s ends after the load", f.Name)
	}
}

// FuzzFaultTimeline expands one or two faults under every cover mode with arbitrary
// times: a scenario that validates always yields injections inside the load.
func FuzzFaultTimeline(f *testing.F) {
	f.Add(uint8(1), int64(95), int64(30), int64(5), int64(10), int64(20), int64(0))
	f.Add(uint8(2), int64(3600), int64(0), int64(5), int64(10), int64(20), int64(0))
	f.Add(uint8(2), int64(1), int64(540), int64(30), int64(15), int64(520), int64(1))
	f.Add(uint8(0), int64(60), int64(0), int64(30), int64(15), int64(59), int64(0))
	f.Fuzz(func(t *testing.T, mode uint8, duration, period, at1, for1, at2, for2 int64) {
		cover := []string{CoverFixed, CoverRepeat, CoverScale}[int(mode)%3]
		ms := func(v int64) string { return fmt.Sprintf("%dms", v) }
		yaml := fmt.Sprintf("name: t\nduration: %s\nworkloads: [{type: agents}]\nfault_timeline: {cover: %s, period: %s}\n"+
			"faults:\n  - {type: x, target: client, at: %s, for: %s}\n  - {type: y, target: decode, at: %s, for: %s}\n",
			ms(duration), cover, ms(period), ms(at1), ms(for1), ms(at2), ms(for2))
		if cover == CoverFixed {
			yaml = strings.Replace(yaml, ", period: "+ms(period), "", 1)
		}
		sc, err := Parse("f.yaml", []byte(yaml))
		if err != nil {
			problemsOf(t, err)
			return
		}
		checkInjections(t, sc)
		if cover != CoverRepeat {
			require.Len(t, sc.Faults, 2)
		}
	})
}

// TestExpandFaults checks the expansion of each cover mode.
func TestExpandFaults(t *testing.T) {
	s := func(d time.Duration) Duration { return Duration(d) }
	faults := []Fault{
		{Name: "kill", At: s(10 * time.Second), For: s(5 * time.Second)},
		{Name: "stall", At: s(30 * time.Second), For: s(10 * time.Second)},
	}
	type inj struct {
		name     string
		at, for_ time.Duration
	}
	tests := []struct {
		name     string
		ft       FaultTimeline
		duration time.Duration
		want     []inj
	}{
		{"fixed is the list", FaultTimeline{}, time.Hour, []inj{{"kill", 10 * time.Second, 5 * time.Second}, {"stall", 30 * time.Second, 10 * time.Second}}},
		{"repeat every span", FaultTimeline{Cover: CoverRepeat}, 100 * time.Second, []inj{
			{"kill", 10 * time.Second, 5 * time.Second}, {"stall", 30 * time.Second, 10 * time.Second},
			{"kill#2", 50 * time.Second, 5 * time.Second}, {"stall#2", 70 * time.Second, 10 * time.Second},
			{"kill#3", 90 * time.Second, 5 * time.Second}, // stall#3 would end at 120s
		}},
		{"repeat with a period", FaultTimeline{Cover: CoverRepeat, Period: s(time.Minute)}, 2 * time.Minute, []inj{
			{"kill", 10 * time.Second, 5 * time.Second}, {"stall", 30 * time.Second, 10 * time.Second},
			{"kill#2", 70 * time.Second, 5 * time.Second}, {"stall#2", 90 * time.Second, 10 * time.Second},
		}},
		{"repeat shorter than a cycle", FaultTimeline{Cover: CoverRepeat}, 20 * time.Second, []inj{{"kill", 10 * time.Second, 5 * time.Second}}},
		{"scale up", FaultTimeline{Cover: CoverScale}, 400 * time.Second, []inj{{"kill", 100 * time.Second, 50 * time.Second}, {"stall", 300 * time.Second, 100 * time.Second}}},
		{"scale down", FaultTimeline{Cover: CoverScale, Period: s(time.Minute)}, 20 * time.Second, []inj{
			{"kill", 3333 * time.Millisecond, 1667 * time.Millisecond}, {"stall", 10 * time.Second, 3333 * time.Millisecond}}},
		{"scale cuts to milliseconds", FaultTimeline{Cover: CoverScale, Period: s(time.Hour)}, time.Second, []inj{
			{"kill", 2 * time.Millisecond, 2 * time.Millisecond}, {"stall", 8 * time.Millisecond, 3 * time.Millisecond}}},
		{"scale never cuts for to 0", FaultTimeline{Cover: CoverScale, Period: s(time.Hour)}, 100 * time.Millisecond, []inj{
			{"kill", 0, time.Millisecond}, {"stall", 0, time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []inj
			for _, f := range expandFaults(tt.ft, faults, Duration(tt.duration)) {
				got = append(got, inj{f.Name, f.At.D(), f.For.D()})
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// ApplyDefaults expands a repeated timeline once, however often it is called, and the
// problems of a repeated fault point at the fault as written.
func TestFaultTimelineIdempotent(t *testing.T) {
	sc, err := Parse("r.yaml", []byte(minimal+"duration: 1m\nfault_timeline: {cover: repeat}\nfaults:\n  - {name: k, type: x, target: client, at: 5s, for: 5s}\n"))
	require.NoError(t, err)
	require.Len(t, sc.Faults, 6)
	sc.ApplyDefaults()
	sc.ApplyDefaults()
	assert.Len(t, sc.Faults, 6)
	assert.Equal(t, "k#6", sc.Faults[5].Name)
	require.NoError(t, sc.Validate())
	assert.Empty(t, sc.FaultsLeftOut())
}

func TestOverrides(t *testing.T) {
	sc, err := Parse("o.yaml", []byte(minimal), WithOverrides(func(sc *Scenario) {
		sc.Duration = Duration(90 * time.Second)
		sc.Seed = 9
	}))
	require.NoError(t, err)
	assert.Equal(t, int64(9), sc.Seed)
	assert.Equal(t, 90*time.Second, sc.Workloads[0].Duration.D())
	_, err = Parse("o.yaml", []byte(minimal+"faults:\n  - {type: decode_crash, target: decode, at: 20s}\n"),
		WithOverrides(func(sc *Scenario) { sc.Duration = Duration(10 * time.Second) }))
	requireProblems(t, err, "o.yaml:5: faults[0].at: (20s) must be before the end of load")
}

func TestMergeKeys(t *testing.T) {
	sc, err := Parse("m.yaml", []byte(`name: m
workloads:
  - &cohort
    name: a
    type: agents
    agents: 3
    turns: 2
  - <<: *cohort
    name: b
    start: 10s
`))
	require.NoError(t, err)
	w := sc.Workloads[1]
	assert.Equal(t, "b", w.Name)
	assert.Equal(t, 3, w.Agents)
	assert.Equal(t, 2, w.Turns)
	assert.Equal(t, 10*time.Second, w.Start.D())
	// Lines: the merge site's own keys keep theirs, merged keys take the merge key's.
	assert.Equal(t, 9, sc.Line("workloads[1].name"))
	assert.Equal(t, 8, sc.Line("workloads[1].agents"))
	assert.Equal(t, 6, sc.Line("workloads[0].agents"))
	for _, self := range []string{"workloads:\n  - &a\n    <<: *a\n", "target: &t\n  <<: [*t]\n", "&r\n<<: *r\n"} {
		_, err := Parse("r.yaml", []byte(self))
		assert.Error(t, err, "self-merge %q accepted", self)
	}
	_, err = Parse("m.yaml", []byte("name: m\nworkloads:\n  - &c {type: agents, agnets: 1}\n  - <<: *c\n"))
	requireProblems(t, err,
		`m.yaml:3: workloads[0].agnets: unknown field (did you mean "agents"?)`,
		`m.yaml:4: workloads[1].agnets: unknown field (did you mean "agents"?) (from anchor &c, line 3)`)
}

func TestProblemsSummary(t *testing.T) {
	tests := []struct {
		ps   Problems
		want string
	}{
		{Problems{{Msg: "a"}}, "1 problem"},
		{Problems{{Msg: "a"}, {Msg: "b"}}, "2 problems"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.ps.Summary())
		})
	}
}

// An alias bomb (each anchor aliasing the previous one ten times) is refused quickly.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	// Merge keys accept lists, and the walker follows them: the place a bomb could go off.
	b.WriteString("name: t\nbombs:\n  - &a0 {type: agents}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "  - &a%d [", i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("workloads:\n  - <<: *a9\n")
	_, err := Parse("bomb.yaml", []byte(b.String()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too many nodes once aliases are expanded")
}

// The scenario as run (JSON, written next to a run's outputs) holds the concrete
// injections; decoding it and applying defaults again does not repeat the repeats.
func TestExpandedScenarioRoundTrips(t *testing.T) {
	sc, err := Load("nightly-soak", WithOverrides(func(sc *Scenario) { sc.Duration = Duration(20 * time.Minute) }))
	require.NoError(t, err)
	data, err := json.Marshal(sc)
	require.NoError(t, err)
	var again Scenario
	require.NoError(t, json.Unmarshal(data, &again))
	again.ApplyDefaults()
	require.NoError(t, again.Validate())
	require.Len(t, again.Faults, len(sc.Faults))
	for i, f := range sc.Faults {
		g := again.Faults[i]
		assert.Equal(t, []any{f.Name, f.At, f.For}, []any{g.Name, g.At, g.For})
	}
}

// Expansion runs before validation, so it must stay quick on lists validation refuses:
// held faults with a nanosecond period over hours, or periods that overflow.
func TestExpandFaultsBounded(t *testing.T) {
	tests := []struct {
		name     string
		faults   []Fault
		period   Duration
		duration Duration
		want     int
	}{
		{"held faults never repeat", []Fault{{Name: "h", At: 0, For: 0}}, 1, Duration(time.Hour), 0},
		{"tiny period is capped", []Fault{{Name: "k", At: 0, For: 1}}, 1, Duration(time.Hour), MaxInjections + 1},
		{"huge period", []Fault{{Name: "k", At: 0, For: 1}}, Duration(math.MaxInt64), Duration(math.MaxInt64), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := expandFaults(FaultTimeline{Cover: CoverRepeat, Period: tt.period}, tt.faults, tt.duration)
			assert.Len(t, got, tt.want)
			for _, f := range got {
				assert.GreaterOrEqual(t, f.At, Duration(0))
			}
		})
	}
}

// The plan says how a repeated or scaled fault list covers the duration, and which
// faults never run.
func TestPlanFaultTimeline(t *testing.T) {
	const faults = "faults:\n  - {name: kill, type: x, target: client, at: 10s, for: 5s}\n  - {name: stall, type: y, target: client, at: 30s, for: 10s}\n"
	tests := []struct {
		name     string
		timeline string
		duration string
		cover    string
		notes    []string
	}{
		{"fixed says nothing", "", "1m", "", nil},
		{"repeat", "{cover: repeat}", "100s", "2 faults repeated every 40s: 5 injections", nil},
		{"repeat shorter than a cycle", "{cover: repeat}", "20s", "2 faults repeated every 40s: 1 injection",
			[]string{"1 fault left out: stall (it does not fit before the end of load at 20s; one cycle is 40s)"}},
		{"scale", "{cover: scale}", "160s", "2 faults scaled ×4 from a 40s cycle to the 2m40s load", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := minimal + "duration: " + tt.duration + "\n" + faults
			if tt.timeline != "" {
				y += "fault_timeline: " + tt.timeline + "\n"
			}
			sc, err := Parse("p.yaml", []byte(y))
			require.NoError(t, err)
			tl := Plan(sc)
			assert.Equal(t, tt.cover, tl.FaultCover)
			assert.Equal(t, tt.notes, tl.Notes)
			var buf bytes.Buffer
			require.NoError(t, tl.Write(&buf))
			for _, n := range tt.notes {
				assert.Contains(t, buf.String(), "note      "+n)
			}
		})
	}
}

// TestTraceWorkloadTokens: a trace workload's lengths come from the trace. A workload
// max_tokens or prompt_tokens other than the defaults a rendered scenario writes back
// was accepted and ignored, and plan printed it as if it capped the requests.
func TestTraceWorkloadTokens(t *testing.T) {
	const head = "name: t\nduration: 10s\nworkloads:\n  - type: trace\n    trace: {file: traces/azure-conv.csv%s}\n"
	tests := []struct {
		name, trace, extra string
		want               []string // problems; none: plan must show planLine
		planLine           string
	}{
		{name: "max_tokens set", extra: "    max_tokens: 8\n",
			want: []string{"t.yaml:6: workloads[0].max_tokens: does not apply to type trace: each request's comes from the trace (cap it with trace.max_tokens)"}},
		{name: "prompt_tokens set", extra: "    prompt_tokens: 100\n",
			want: []string{"t.yaml:6: workloads[0].prompt_tokens: does not apply to type trace: lengths come from the trace (scale them with trace.block_tokens)"}},
		{name: "rendered defaults", extra: "    max_tokens: 16\n    prompt_tokens: 32\n", planLine: "max_tokens from the trace,"},
		{name: "rendered cap", trace: ", max_tokens: 5", extra: "    max_tokens: 5\n", planLine: "max_tokens from the trace (at most 5),"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := Parse("t.yaml", []byte(fmt.Sprintf(head, tt.trace)+tt.extra))
			if len(tt.want) > 0 {
				requireProblems(t, err, tt.want...)
				return
			}
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, Plan(sc).Write(&buf))
			assert.Contains(t, buf.String(), tt.planLine)
			assert.NotContains(t, buf.String(), "max_tokens 16")
		})
	}
}

// TestBareKeyTakesTheDefault: a key with no value (YAML null) is as if absent. It
// counted as set, so the default was skipped and the zero value ran: "stream:" turned
// streaming off, "turns:" ran sessions until the window ended, "seed:" seeded with 0.
func TestBareKeyTakesTheDefault(t *testing.T) {
	sc, err := Parse("t.yaml", []byte("name: t\nseed:\nworkloads:\n  - type: agents\n    stream:\n    turns:\n    agents: ~\n"))
	require.NoError(t, err)
	w := sc.Workloads[0]
	assert.Equal(t, int64(DefaultSeed), sc.Seed)
	assert.True(t, w.Stream)
	assert.Equal(t, DefaultTurns, w.Turns)
	assert.Equal(t, DefaultAgents, w.Agents)
	assert.Equal(t, 5, sc.Line("workloads[0].stream"), "its line is still known")
}
