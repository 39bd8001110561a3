package scenarios

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `name: t
workloads:
  - type: agents
`

func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %T: %v", err, err)
	}
	return ps
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
				`t.yaml:6: workloads[0].type: must be agents, open_loop or burst, got "agentz"`,
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
			want: []string{"t.yaml:6: assertions[0]: no_leaks needs target.metrics_url"},
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
			if err == nil {
				t.Fatal("want problems, got none")
			}
			ps := problemsOf(t, err)
			lines := ps.Lines()
			if len(lines) != len(tt.want) {
				t.Errorf("got %d problems, want %d:\n%s", len(lines), len(tt.want), strings.Join(lines, "\n"))
			}
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					if strings.HasPrefix(l, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing problem %q in:\n%s", w, strings.Join(lines, "\n"))
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	sc, err := Parse("mini.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
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
		{"assertions", strings.Join(sc.Assertions, ","), "no_silent_drops,valid_responses,no_leaks"},
		{"no proxies", sc.Reference.Proxies, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Explicit values win, including false and 0.
	sc, err = Parse("x.yaml", []byte("name: t\nseed: 0\nworkloads:\n  - type: agents\n    stream: false\n    turns: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Seed != 0 || sc.Workloads[0].Stream || sc.Workloads[0].Turns != 0 {
		t.Errorf("explicit values overridden: seed %d stream %v turns %d", sc.Seed, sc.Workloads[0].Stream, sc.Workloads[0].Turns)
	}
	// Defaults are idempotent.
	before := *sc
	sc.ApplyDefaults()
	if before.Drain != sc.Drain || before.Deadlines != sc.Deadlines {
		t.Error("ApplyDefaults is not idempotent")
	}
}

func TestFaultDefaults(t *testing.T) {
	sc, err := Parse("f.yaml", []byte(minimal+"faults:\n  - type: kv_transfer_stall\n    target: prefill->decode\n    at: 5s\n    for: 5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Reference.Proxies || !sc.Reference.FaultInjection {
		t.Errorf("proxies %v fault_injection %v, want both true", sc.Reference.Proxies, sc.Reference.FaultInjection)
	}
	if sc.Faults[0].Name != "kv_transfer_stall-0" {
		t.Errorf("fault name %q", sc.Faults[0].Name)
	}
	if got := strings.Join(sc.Assertions, ","); !strings.Contains(got, "recovery") {
		t.Errorf("assertions %s lack recovery", got)
	}
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
			if k != tt.kind || ok != tt.ok {
				t.Errorf("Resolve = %v, %v; want %v, %v", k, ok, tt.kind, tt.ok)
			}
			if got := strings.Join(topo.Members(tt.target), ","); got != tt.members {
				t.Errorf("Members = %q, want %q", got, tt.members)
			}
		})
	}
	ext := &Scenario{Target: Target{URL: "http://x", Launch: []Launch{{Name: "sglang-decode", Role: "decode"}}}}
	if k, ok := ext.Topology().Resolve("sglang-decode"); !ok || k != TargetProcess {
		t.Error("launch process not a target")
	}
	if _, ok := ext.Topology().Resolve("router"); ok {
		t.Error("external target has no embedded router")
	}
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
	}
	for _, tt := range tests {
		d, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || d.D() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v", tt.in, d, err)
		}
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load("smoke"); err != nil {
		t.Fatalf("embedded smoke: %v", err)
	}
	if _, err := Load("smoke.yaml"); err != nil {
		t.Fatalf("embedded smoke.yaml: %v", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(p, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if sc.File != p {
		t.Errorf("File = %q", sc.File)
	}
	if _, err := Load("no-such-scenario"); !errors.Is(err, ErrNotFound) {
		t.Errorf("want ErrNotFound, got %v", err)
	}
	if _, err := Load("../etc/passwd"); err == nil {
		t.Error("loaded a path outside")
	}
}

// TestShippedScenarios loads every embedded scenario and checks its header comment.
func TestShippedScenarios(t *testing.T) {
	list := List()
	found := false
	for _, info := range list {
		t.Run(info.Name, func(t *testing.T) {
			sc, err := Load(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Name != info.Name {
				t.Errorf("name %q differs from file %s", sc.Name, info.File)
			}
			data, _ := Embedded(info.Name)
			if !bytes.HasPrefix(data, []byte("# ")) || !bytes.Contains(data, []byte("Expected")) {
				t.Errorf("%s lacks a header comment saying what it shows and the expected verdict", info.File)
			}
			if info.Summary == "" {
				t.Error("empty summary")
			}
			if info.Expected != "PASS" && info.Expected != "FAIL" {
				t.Errorf("header says expected verdict %q, want PASS or FAIL", info.Expected)
			}
		})
		if info.Name == "smoke" {
			found = true
		}
	}
	if !found {
		t.Error("smoke not listed")
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
	if err != nil {
		t.Fatal(err)
	}
	tl := Plan(sc)
	if tl.Requests != 30+480+50 {
		t.Errorf("expected requests %d", tl.Requests)
	}
	var buf bytes.Buffer
	if err := tl.Write(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/plan.golden", buf.Bytes())
	// Plan is pure: the same scenario gives the same plan.
	var again bytes.Buffer
	_ = Plan(sc).Write(&again)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("plan is not deterministic")
	}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := Parse("p.yaml", []byte("name: p\nduration: 10s\nworkloads:\n  - name: a\n    type: agents\n    agents: 10\n    turns: 3\n"+tt.extra))
			if err != nil {
				t.Fatal(err)
			}
			tl := Plan(sc)
			if len(tl.Workloads) != 1 {
				t.Fatalf("workloads %+v", tl.Workloads)
			}
			w := tl.Workloads[0]
			if w.Requests != tt.requests || w.Open != tt.open {
				t.Errorf("requests %d open %v, want %d %v", w.Requests, w.Open, tt.requests, tt.open)
			}
			found := false
			for _, s := range tl.Steps {
				if s.Name == "a" && s.Detail == tt.detail {
					found = true
				}
			}
			if !found {
				t.Errorf("no step with detail %q in %+v", tt.detail, tl.Steps)
			}
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(minimal))
	if data, ok := Embedded("smoke"); ok {
		f.Add(data)
	}
	f.Add([]byte("name: t\nworkloads: [{type: open_loop, pacer: {type: sine, rate: 3, amplitude: 1, period: 5s}}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("workloads:\n  - &a {type: agents}\n  - {<<: *a, name: b}\n  - &c\n    <<: *c\n"))
	f.Add([]byte("faults:\n  - {type: x, target: decode, at: -5s, params: {a: [1, {b: 2}]}}\n"))
	f.Add([]byte("duration: 1h\nworkloads: [{type: burst, count: 99999999999999999999}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ps Problems
			if errors.As(err, &ps) && len(ps) == 0 {
				t.Fatal("empty Problems")
			}
			return
		}
		// A valid scenario always has a plan, and the plan is within bounds.
		tl := Plan(sc)
		for _, s := range tl.Steps {
			if s.At < 0 || s.At > tl.Load+tl.Drain {
				t.Fatalf("step %+v outside the timeline", s)
			}
		}
	})
}

func TestOverrides(t *testing.T) {
	sc, err := Parse("o.yaml", []byte(minimal), WithOverrides(func(sc *Scenario) {
		sc.Duration = Duration(90 * time.Second)
		sc.Seed = 9
	}))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Seed != 9 || sc.Workloads[0].Duration.D() != 90*time.Second {
		t.Errorf("seed %d workload duration %s", sc.Seed, sc.Workloads[0].Duration)
	}
	_, err = Parse("o.yaml", []byte(minimal+"faults:\n  - {type: decode_crash, target: decode, at: 20s}\n"),
		WithOverrides(func(sc *Scenario) { sc.Duration = Duration(10 * time.Second) }))
	if ps := problemsOf(t, err); !strings.Contains(ps.Error(), "faults[0].at: (20s) must be before the end of load") {
		t.Errorf("override not validated: %v", ps)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if w := sc.Workloads[1]; w.Name != "b" || w.Agents != 3 || w.Turns != 2 || w.Start.D() != 10*time.Second {
		t.Errorf("merged workload %+v", w)
	}
	for _, self := range []string{"workloads:\n  - &a\n    <<: *a\n", "target: &t\n  <<: [*t]\n", "&r\n<<: *r\n"} {
		if _, err := Parse("r.yaml", []byte(self)); err == nil {
			t.Errorf("self-merge %q accepted", self)
		}
	}
	_, err = Parse("m.yaml", []byte("name: m\nworkloads:\n  - &c {type: agents, agnets: 1}\n  - <<: *c\n"))
	if err == nil || !strings.Contains(err.Error(), "agnets: unknown field") {
		t.Errorf("unknown key under a merge not reported: %v", err)
	}
}
