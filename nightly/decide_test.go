package nightly

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

func TestNightName(t *testing.T) {
	at := time.Date(2026, 12, 3, 23, 59, 0, 0, time.FixedZone("x", -3600))
	for _, tc := range []struct{ name, sha, want, err string }{
		{name: "short sha kept", sha: "abc", want: "2026-12-04-abc"},
		{name: "long sha cut to 7", sha: "0123456789abcdef", want: "2026-12-04-0123456"},
		{name: "no sha", want: "2026-12-04"},
		{name: "path in sha refused", sha: "../x", err: "commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NightName(at, tc.sha)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	taken := map[string]bool{"n": true, "n-2": true}
	assert.Equal(t, "n-3", Unique("n", func(s string) bool { return taken[s] }))
	assert.Equal(t, "m", Unique("m", func(s string) bool { return taken[s] }))
}

func entry(night, scenario, digest string, v reports.Verdict) reports.HistoryEntry {
	return reports.HistoryEntry{Scenario: scenario, Digest: digest, Verdict: v, Dir: "nights/" + night + "/" + scenario}
}

func TestBaselines(t *testing.T) {
	h := []reports.HistoryEntry{
		entry("n1", "a", "d", reports.VerdictPass),
		entry("n2", "a", "d", reports.VerdictPass),
		entry("n3", "a", "d", reports.VerdictFail),                                // failed: never a bar
		entry("n4", "a", "other", reports.VerdictPass),                            // the scenario changed
		entry("n5", "b", "d", reports.VerdictPass),                                // another scenario
		entry("n6", "a", "d", reports.VerdictPass),                                // pruned (not on disk)
		{Scenario: "a", Digest: "d", Verdict: reports.VerdictPass, Dir: "runs/x"}, // not a night's
		entry("n7", "a", "d", reports.VerdictPass),
		entry("tonight", "a", "d", reports.VerdictPass),
	}
	exists := func(dir string) bool { return dir != "nights/n6/a" }
	nights := func(es []reports.HistoryEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, NightOf(e))
		}
		return out
	}
	assert.Equal(t, []string{"n7", "n2", "n1"}, nights(Baselines(h, "a", "d", "tonight", 3, exists)))
	assert.Equal(t, []string{"n7"}, nights(Baselines(h, "a", "d", "tonight", 1, exists)))
	assert.Empty(t, Baselines(h, "a", "new-digest", "tonight", 3, exists))
	assert.Equal(t, []string{"n5"}, nights(Baselines(h, "b", "d", "tonight", 3, exists)))
}

// TestRefusal: another backend, server version or launch command is refused; the
// ports a launched pack listens on (free ports each night) are not a difference.
func TestRefusal(t *testing.T) {
	launch := func(p1, p2 string) string {
		return "decode: pdserver sglang-server --model-path=ref --disaggregation-mode=decode --port=" + p1 +
			"; router: pdserver sglang-router --prefill http://127.0.0.1:" + p2 + " --decode http://{link:router->decode} --prometheus-port " + p2
	}
	a := reports.Identity{Mode: "real", Backend: "launched", ServerVersion: "0.4.1", Launch: launch("34521", "40055")}
	b := a
	b.Launch = launch("39025", "32999")
	assert.Empty(t, Refusal(a, b), "only the ports differ")
	c := b
	c.Launch = strings.Replace(b.Launch, "--model-path=ref", "--model-path=llama", 1)
	assert.Len(t, Refusal(a, c), 1, "another model is another launch")
	assert.Contains(t, Refusal(a, c)[0], "target.launch")
	d := b
	d.ServerVersion = "0.4.2"
	assert.Equal(t, []string{`server version "0.4.1" vs "0.4.2"`}, Refusal(a, d))
	e := b
	e.Backend, e.Launch = "tinyref", ""
	assert.Contains(t, Refusal(a, e), `backend "launched" vs "tinyref"`)
}

// TestStateOf: contention makes the pooled comparison inconclusive even with
// regressions (the machine may explain them), never a regression.
func TestStateOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *reports.Comparison
		want CompareState
	}{
		{"no comparison", nil, CompareNone},
		{"quiet, nothing moved", &reports.Comparison{}, CompareOK},
		{"quiet, a regression", &reports.Comparison{Regressions: []string{"p99(ttft) +40%"}}, CompareRegressed},
		{"contended, a regression", &reports.Comparison{Regressions: []string{"p99(ttft) +40%"}, Contended: []string{"NEW was contended: cpu pressure 80%"}}, CompareInconclusive},
		{"contended, nothing moved", &reports.Comparison{Contended: []string{"BASE 2 of 3 was contended: steal 9%"}}, CompareInconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, StateOf(tc.c)) })
	}
}

func TestPrune(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 12, d, 2, 17, 0, 0, time.UTC) }
	nights := []Night{{"2026-12-03-bbbbbbb", day(3)}, {"2026-12-01-ccccccc", day(1)}, {"2026-12-03-aaaaaaa", day(3).Add(time.Hour)}, {"2026-12-02-ddddddd", day(2)}}
	assert.Equal(t, []string{"2026-12-01-ccccccc", "2026-12-02-ddddddd"}, Prune(nights, 2, "2026-12-03-aaaaaaa"))
	assert.Nil(t, Prune(nights, 0, "x"), "0 keeps all")
	assert.Nil(t, Prune(nights, 4, "x"))
	// Tonight is never pruned, even when the clock made it look old.
	assert.Equal(t, []string{"2026-12-02-ddddddd"}, Prune(nights, 2, "2026-12-01-ccccccc"))
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []RunResult
		want int
	}{
		{"all pass", []RunResult{{Code: 0}, {Code: 0}}, ExitPass},
		{"a regression", []RunResult{{Code: 0, Regressed: true}, {Code: 0}}, ExitFail},
		{"a failure", []RunResult{{Code: 1}, {Code: 0}}, ExitFail},
		{"invalid only", []RunResult{{Code: 3}, {Code: 0}}, ExitInfra},
		{"evidence outranks invalid", []RunResult{{Code: 3}, {Code: 1}}, ExitFail},
		{"refused at run time is invalid", []RunResult{{Code: 2}}, ExitInfra},
		{"inconclusive is 3, not silent", []RunResult{{Code: 0, Comparison: CompareInconclusive}, {Code: 0}}, ExitInfra},
		{"evidence outranks inconclusive", []RunResult{{Code: 0, Comparison: CompareInconclusive}, {Code: 0, Regressed: true}}, ExitFail},
		{"no runs", nil, ExitPass},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, ExitCode(tc.runs)) })
	}
}

// FuzzNightOf: the archive-path parser never panics and only names a night for
// nights/<night>/<scenario>.
func FuzzNightOf(f *testing.F) {
	for _, s := range []string{"nights/2026-12-03-abc/smoke", "runs/x", "", "nights//x", "nights/a/b/c", `nights\a\b`, "../nights/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		n := NightOf(reports.HistoryEntry{Dir: dir})
		if n != "" && (n == "." || n == ".." || len(n) > len(dir)) {
			t.Fatalf("NightOf(%q) = %q", dir, n)
		}
	})
}
