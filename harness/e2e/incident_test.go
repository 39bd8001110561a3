package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

// shipped is the path of a scenario shipped in scenarios/.
func shipped(name string) string {
	return filepath.Join("..", "..", "scenarios", name+".yaml")
}

// expectShipped checks that the shipped scenario's header promises the verdict the test
// asserts, so the test and the header cannot disagree.
func expectShipped(t *testing.T, name, verdict string) {
	t.Helper()
	for _, info := range scenarios.List() {
		if info.Name == name {
			if info.Expected != verdict {
				t.Fatalf("%s's header expects %q; this test asserts %s", name, info.Expected, verdict)
			}
			return
		}
	}
	t.Fatalf("%s is not an embedded scenario", name)
}

// shortened copies a shipped scenario into dir with top-level keys replaced (the load
// and the server are unchanged; only how long the harness waits) and returns its path.
func shortened(t *testing.T, dir, name string, set map[string]any) string {
	t.Helper()
	data, err := os.ReadFile(shipped(name))
	require.NoError(t, err)
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k, v := range set {
		doc[k] = v
	}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	p := filepath.Join(dir, name+"-short.yaml")
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return p
}

// TestIncidentSGLangFails runs the incident (silent-drop-sglang) with the harness's
// deadlines shortened from 20 s to 8 s before the first token: 30 agents' growing
// conversations exhaust decode's 768-token pool, SGLang's FIFO prealloc queue blocks on
// its head, and the run must fail with silent drops that decode's /debug/requests shows
// held in its prealloc queue.
func TestIncidentSGLangFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the incident against the reference PD server")
	}
	t.Parallel()
	expectShipped(t, "silent-drop-sglang", "FAIL")
	sc := shortened(t, t.TempDir(), "silent-drop-sglang", map[string]any{
		"duration":  "10s",
		"deadlines": map[string]any{"connect": "5s", "first_token": "8s", "stall": "8s", "total": "12s"},
		"drain":     map[string]any{"timeout": "15s", "leak_timeout": "10s"},
	})
	r := runHarness(t, sc)
	res := r.res
	t.Logf("exit %d in %s: %d requests, %d silent drops, stages %v", r.code, r.elapsed.Round(100e6), res.Requests, res.SilentDrops, res.DropStages)
	if r.code != 1 || res.Verdict != reports.VerdictFail {
		t.Fatalf("exit %d, verdict %q; want 1, fail\n%s", r.code, res.Verdict, r.diagnostics())
	}
	if res.SilentDrops == 0 {
		t.Fatalf("no silent drops\n%s", r.diagnostics())
	}
	if got := assertion(res, "no_silent_drops"); got == nil || got.Passed {
		t.Errorf("no_silent_drops assertion %+v, want failed", got)
	}
	if n := res.DropStages["decode-0: prealloc"]; n != res.SilentDrops {
		t.Errorf("%d of %d drops located in decode's prealloc queue: %v", n, res.SilentDrops, res.DropStages)
	}
	if len(res.Drops) != res.SilentDrops {
		t.Fatalf("%d drop details for %d drops", len(res.Drops), res.SilentDrops)
	}
	for _, d := range res.Drops {
		if !strings.HasPrefix(string(d.Phase), "before") {
			t.Errorf("drop %s in phase %q, want before the first token", d.RequestID, d.Phase)
		}
		if stage := debugStage(t, d.ServerDebug, "decode-0", d.RequestID); stage != "prealloc" {
			t.Errorf("drop %s: decode-0's /debug/requests says stage %q, want prealloc: %s", d.RequestID, stage, d.ServerDebug)
		}
	}
	checkForensics(t, r, res)
}

// checkForensics is the done-when check: the failing incident run leaves
// forensics/ with, for every process the debug probe knows, a goroutine dump and its
// /debug/requests, in the first-drop bundle and in the end bundle; summary.md says so.
func checkForensics(t *testing.T, r run, res reports.Results) {
	t.Helper()
	require.NotEmpty(t, res.Drops)
	var dbg struct {
		Sources []struct {
			Process string `json:"process"`
		} `json:"sources"`
	}
	require.NoError(t, json.Unmarshal(res.Drops[0].ServerDebug, &dbg))
	var procs []string
	for _, s := range dbg.Sources {
		procs = append(procs, s.Process)
	}
	require.Subset(t, procs, []string{"router", "prefill-0", "decode-0"})
	firstDrop, err := filepath.Glob(filepath.Join(r.out, "forensics", "first-drop-*"))
	require.NoError(t, err)
	require.Len(t, firstDrop, 1, "one first-drop bundle")
	for _, bundle := range []string{firstDrop[0], filepath.Join(r.out, "forensics", "end")} {
		for _, p := range procs {
			g, err := os.ReadFile(filepath.Join(bundle, "goroutines", p+".txt"))
			require.NoError(t, err, "%s: goroutine dump of %s", bundle, p)
			require.Contains(t, string(g), "goroutine ", p)
			d, err := os.ReadFile(filepath.Join(bundle, "debug-requests", p+".json"))
			require.NoError(t, err, "%s: /debug/requests of %s", bundle, p)
			require.True(t, json.Valid(d), "%s: %s", p, d)
		}
		require.FileExists(t, filepath.Join(bundle, "MANIFEST.json"))
		require.FileExists(t, filepath.Join(bundle, "harness-goroutines.txt"))
	}
	summary, err := os.ReadFile(filepath.Join(r.out, "summary.md"))
	require.NoError(t, err)
	require.Contains(t, string(summary), "[forensics/end](forensics/end/MANIFEST.json)", "summary.md links the end bundle")
}

// TestIncidentStrictPasses runs the same load (silent-drop-strict, as shipped, with a
// shorter load window) against strict semantics: zero silent drops, no leaks.
func TestIncidentStrictPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the incident's load against the reference PD server")
	}
	t.Parallel()
	expectShipped(t, "silent-drop-strict", "PASS")
	r := runHarness(t, shipped("silent-drop-strict"), "--duration", "12s")
	res := r.res
	t.Logf("exit %d in %s: %d requests %v", r.code, r.elapsed.Round(100e6), res.Requests, res.Outcomes)
	if r.code != 0 || res.Verdict != reports.VerdictPass {
		t.Fatalf("exit %d, verdict %q; want 0, pass\n%s", r.code, res.Verdict, r.diagnostics())
	}
	if res.SilentDrops != 0 || res.Unresolved != 0 {
		t.Errorf("%d silent drops, %d unresolved: %+v", res.SilentDrops, res.Unresolved, res.Drops)
	}
	if res.Leak == nil || !res.Leak.Passed {
		t.Errorf("leak check %+v", res.Leak)
	}
	if res.Outcomes[ledger.OutcomeOK] == 0 {
		t.Errorf("nothing succeeded: %v", res.Outcomes)
	}
}

func assertion(res reports.Results, name string) *reports.AssertionResult {
	for i := range res.Assertions {
		if res.Assertions[i].Name == name {
			return &res.Assertions[i]
		}
	}
	return nil
}

// debugWhere reads the summary line of a drop's server_debug.
func debugWhere(raw json.RawMessage) string {
	var dbg struct {
		Where string `json:"where"`
	}
	_ = json.Unmarshal(raw, &dbg)
	return dbg.Where
}

// debugStage reads the stage a process's /debug/requests gave for a request from a
// drop's server_debug.
func debugStage(t *testing.T, raw json.RawMessage, process, id string) string {
	t.Helper()
	var dbg struct {
		Sources []struct {
			Process string `json:"process"`
			Found   bool   `json:"found"`
			Entries []struct {
				ID    string `json:"id"`
				Stage string `json:"stage"`
			} `json:"entries"`
		} `json:"sources"`
	}
	if err := json.Unmarshal(raw, &dbg); err != nil {
		t.Errorf("server_debug of %s: %v", id, err)
		return ""
	}
	for _, s := range dbg.Sources {
		if s.Process != process || !s.Found {
			continue
		}
		for _, e := range s.Entries {
			if e.ID == id {
				return e.Stage
			}
		}
	}
	return ""
}

// semanticsPair is one fault that strict semantics bounds and SGLang's PD semantics does
// not: the same scenario must pass under strict and fail under sglang with every silent
// drop held in stage.
type semanticsPair struct {
	fault string
	// stage is where the server's /debug/requests must locate each sglang drop.
	stage string
}

// pairs run with deadlines shorter than the fault, so a request the server holds for the
// whole fault is a silent drop, and strict bounds (2 s) shorter than the deadlines.
var pairs = []semanticsPair{
	// SGLang does not bound the Transferring state: decode waits for pages as long as
	// prefill's sender is stuck. Strict fails the transfer after --transfer-timeout.
	{fault: `{name: kv-stall, type: kv_transfer_stall, target: prefill, at: 2s, for: 6s, params: {mode: pause}}`,
		stage: "decode-0: transfer"},
}

// TestSemanticsPairs runs each pair's fault under both semantics.
func TestSemanticsPairs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness against the reference PD server")
	}
	for _, p := range pairs {
		sc, err := scenarios.Parse("pair.yaml", []byte(faultCase{name: "pair", faults: []string{p.fault}}.yaml()))
		require.NoError(t, err)
		typ := sc.Faults[0].Type
		t.Run(typ+"/strict", func(t *testing.T) {
			t.Parallel()
			c := faultCase{name: typ + " strict", faults: []string{p.fault}, deadlines: pairDeadlines}
			r := runHarness(t, c.write(t, t.TempDir()))
			t.Logf("exit %d in %s, %d requests %v", r.code, r.elapsed.Round(100e6), r.res.Requests, r.res.Outcomes)
			checkStrictPass(t, r, c)
		})
		t.Run(typ+"/sglang", func(t *testing.T) {
			t.Parallel()
			c := faultCase{name: typ + " sglang", faults: []string{p.fault}, deadlines: pairDeadlines, sglang: true}
			r := runHarness(t, c.write(t, t.TempDir()))
			res := r.res
			t.Logf("exit %d in %s: %d requests, %d silent drops, stages %v", r.code, r.elapsed.Round(100e6), res.Requests, res.SilentDrops, res.DropStages)
			if r.code != 1 || res.Verdict != reports.VerdictFail || res.SilentDrops == 0 {
				t.Fatalf("exit %d, verdict %q, %d silent drops; want 1, fail, drops\n%s\n%s", r.code, res.Verdict, res.SilentDrops, c.yaml(), r.diagnostics())
			}
			// A drop classified while the fault held must be located in the stage; one
			// classified after the fault was reverted may already have moved on (the
			// server resumed the request a moment before the harness gave up on it).
			if len(res.Faults) != 1 || res.Faults[0].Stop == nil {
				t.Fatalf("faults %+v, want one that stopped", res.Faults)
			}
			stop, located := *res.Faults[0].Stop, 0
			for _, d := range res.Drops {
				where := debugWhere(d.ServerDebug)
				switch {
				case strings.Contains(where, p.stage+" "):
					located++
				case d.At < stop:
					b, _ := json.Marshal(d)
					t.Errorf("drop %s at %.2fs, while the fault held (until %.2fs), not located in %s: %s", d.RequestID, d.At, stop, p.stage, b)
				default:
					t.Logf("drop %s at %.2fs, after the fault stopped at %.2fs: %s", d.RequestID, d.At, stop, where)
				}
			}
			if located == 0 {
				t.Errorf("no drop located in %s: %v", p.stage, res.DropStages)
			}
			for _, f := range res.Faults {
				if f.Verified == nil || !*f.Verified {
					t.Errorf("fault %s not verified: %s", f.Name, f.Detail)
				}
			}
		})
	}
}

// pairDeadlines are shorter than a pair's 6 s fault and longer than strict's 2 s bounds.
const pairDeadlines = "{connect: 5s, first_token: 4s, stall: 4s, total: 10s}"
