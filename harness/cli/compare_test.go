package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

// slowOpenAI streams three tokens: the first after delay, the others delay/4 apart. Its
// latency is the knob compare's test turns.
func slowOpenAI(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		wait := delay
		for i := range 3 {
			select {
			case <-time.After(wait):
			case <-r.Context().Done():
				return
			}
			wait = delay / 4
			finish := any(nil)
			if i == 2 {
				finish = "length"
			}
			b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "ref",
				"choices": []map[string]any{{"index": 0, "delta": map[string]any{"content": "tok "}, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

const compareScenario = `# compare: two workloads against an external target. Expected: PASS.
name: compare
seed: 7
duration: 3s
workloads:
  - name: agents
    type: agents
    agents: 4
    turns: 4
    max_tokens: 3
  - name: steady
    type: open_loop
    max_tokens: 3
    pacer: {type: constant, rate: RATE}
    max_in_flight: 64
deadlines:
  connect: 2s
  first_token: 3s
  stall: 3s
  total: 5s
drain:
  timeout: 8s
assertions: [no_silent_drops, valid_responses]
`

// contentionLines are compare.md's lines on each run's contention, for a failure message.
func contentionLines(t *testing.T, md string) string {
	var out []string
	for _, l := range strings.Split(readFile(t, md), "\n") {
		if strings.Contains(l, " contention: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCompareEndToEnd runs the real harness four times against real HTTP servers and
// compares the runs: the same server twice (0), a server 4× slower (1), another scenario
// (2, and with --force 0 or 1 saying so).
func TestCompareEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real harness four times")
	}
	dir := t.TempDir()
	sc := writeFile(t, dir, "compare.yaml", strings.Replace(compareScenario, "RATE", "30", 1))
	other := writeFile(t, dir, "other.yaml", strings.Replace(compareScenario, "RATE", "20", 1))
	fast, slow := slowOpenAI(t, 100*time.Millisecond), slowOpenAI(t, 400*time.Millisecond)
	hist := filepath.Join(dir, "history.jsonl")
	runSummary := filepath.Join(dir, "run-summary.md")
	t.Setenv(StepSummaryEnv, runSummary)
	run := func(name, scenario, url string) string {
		out := filepath.Join(dir, name)
		code, stdout, stderr := execute(t, []string{"run", scenario, "--target", url, "--out", out, "-q", "--history", hist, "--label", name}, WithRunner(harnessRun))
		require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
		return out
	}
	base := run("base", sc, fast.URL)
	again := run("again", sc, fast.URL)
	slower := run("slower", sc, slow.URL)
	different := run("different", other, fast.URL)
	// Each run appended its summary.md to $GITHUB_STEP_SUMMARY and one line to --history.
	assert.Equal(t, 4, strings.Count(readFile(t, runSummary), "# compare: PASS\n"))
	lines := strings.Split(strings.TrimSpace(readFile(t, hist)), "\n")
	require.Len(t, lines, 4)
	first, err := reports.ParseHistoryLine([]byte(lines[0]))
	require.NoError(t, err)
	assert.Equal(t, "base", first.Dir)
	assert.Equal(t, "base", first.Label)
	assert.Equal(t, reports.VerdictPass, first.Verdict)
	assert.NotZero(t, first.Figures["ttft_p50"])

	t.Run("same seed, same target: no regression", func(t *testing.T) {
		// Real runs on a shared machine: a busy one makes the answer inconclusive (3),
		// never a regression.
		code, stdout, stderr := execute(t, []string{"compare", base, again})
		contention := contentionLines(t, filepath.Join(again, "compare-vs-base", reports.CompareMarkdownFile))
		t.Log(contention)
		require.Contains(t, []int{ExitNoRegression, ExitInconclusive}, code, "%s\n%s\n%s", stdout, stderr, contention)
		if code == ExitNoRegression {
			assert.Contains(t, stdout, "no regression")
		} else {
			assert.Contains(t, stdout, "INCONCLUSIVE")
		}
		md := readFile(t, filepath.Join(again, "compare-vs-base", reports.CompareMarkdownFile))
		assert.Contains(t, md, "## Workload steady")
		assert.Contains(t, md, "## Workload agents")
		assert.Contains(t, md, "| p99(ttft) |")
		page := readFile(t, filepath.Join(again, "compare-vs-base", reports.CompareHTMLFile))
		assert.Contains(t, page, "<svg")
		assertSelfContained(t, page)
	})
	t.Run("four times slower: regression", func(t *testing.T) {
		// Every run writes report.html; compare.html links each run's that exists.
		require.FileExists(t, filepath.Join(slower, reports.HTMLFile))
		require.NoError(t, os.Remove(filepath.Join(base, reports.HTMLFile)))
		out := filepath.Join(dir, "cmp-slow")
		// 4x is far above any machine's noise: judged even on a busy machine.
		code, stdout, stderr := execute(t, []string{"compare", base, slower, "--out", out, "--ignore-contention"})
		require.Equal(t, ExitRegression, code, "%s\n%s", stdout, stderr)
		assert.Contains(t, stdout, "REGRESSION")
		assert.Contains(t, stdout, "p50(ttft)")
		md := readFile(t, filepath.Join(out, reports.CompareMarkdownFile))
		assert.Contains(t, md, "**REGRESSION**")
		page := readFile(t, filepath.Join(out, reports.CompareHTMLFile))
		assert.Contains(t, page, `<a href="../slower/report.html">report</a>`)
		assert.Equal(t, 1, strings.Count(page, ">report</a>"), "BASE has no report.html")
	})
	t.Run("a looser tolerance still flags 4x", func(t *testing.T) {
		code, _, _ := execute(t, []string{"compare", base, slower, "--tolerance", "100%", "--out", filepath.Join(dir, "cmp-loose"), "--ignore-contention"})
		assert.Equal(t, ExitRegression, code)
	})
	t.Run("another scenario: not comparable", func(t *testing.T) {
		code, stdout, stderr := execute(t, []string{"compare", base, different, "--out", filepath.Join(dir, "cmp-diff")})
		require.Equal(t, ExitNotComparable, code, "%s\n%s", stdout, stderr)
		assert.Contains(t, stderr, "not comparable")
		assert.NoFileExists(t, filepath.Join(dir, "cmp-diff", reports.CompareMarkdownFile))
	})
	t.Run("another scenario with --force", func(t *testing.T) {
		out := filepath.Join(dir, "cmp-force")
		code, stdout, stderr := execute(t, []string{"compare", base, different, "--force", "--out", out})
		require.Contains(t, []int{ExitNoRegression, ExitRegression, ExitInconclusive}, code, "%s\n%s", stdout, stderr)
		assert.Contains(t, stdout, "forced")
		assert.Contains(t, readFile(t, filepath.Join(out, reports.CompareMarkdownFile)), "**Forced:**")
	})
	t.Run("step summary", func(t *testing.T) {
		summary := filepath.Join(dir, "step-summary.md")
		require.NoError(t, os.WriteFile(summary, []byte("earlier step\n"), 0o644))
		t.Setenv(StepSummaryEnv, summary)
		code, _, _ := execute(t, []string{"compare", base, again, "--out", filepath.Join(dir, "cmp-summary")})
		require.Contains(t, []int{ExitNoRegression, ExitInconclusive}, code)
		got := readFile(t, summary)
		assert.True(t, strings.HasPrefix(got, "earlier step\n# compare compare: "), got)
	})
	t.Run("report --history appends a line", func(t *testing.T) {
		h2 := filepath.Join(dir, "sub", "h2.jsonl")
		require.NoError(t, os.MkdirAll(filepath.Dir(h2), 0o755))
		code, stdout, stderr := execute(t, []string{"report", slower, "-q", "--history", h2, "--label", "again"})
		require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
		got, problems, err := reports.ReadHistory(strings.NewReader(readFile(t, h2)))
		require.NoError(t, err)
		require.Empty(t, problems)
		require.Len(t, got, 1)
		assert.Equal(t, "../slower", got[0].Dir)
		assert.Equal(t, "again", got[0].Label)
		assert.InDelta(t, 0.4, got[0].Figures["ttft_p50"], 0.1)
	})
	t.Run("trend over the history", func(t *testing.T) {
		// A torn line in the middle is skipped and reported with its line number.
		f, err := os.OpenFile(hist, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("{\"scenario\": \"torn\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		// Only the runs whose report.html is still there are linked.
		for _, d := range []string{again, different} {
			require.NoError(t, os.Remove(filepath.Join(d, reports.HTMLFile)))
		}
		site := filepath.Join(dir, "site")
		code, stdout, stderr := execute(t, []string{"trend", hist, "--out", site})
		require.Equal(t, ExitPass, code, "%s\n%s", stdout, stderr)
		assert.Contains(t, stderr, "history.jsonl:5:")
		page := readFile(t, filepath.Join(site, reports.TrendFile))
		assertSelfContained(t, page)
		assert.Contains(t, page, `href="../slower/report.html"`)
		assert.Equal(t, 1, strings.Count(page, "report.html</a>"), "only the run with a report is linked")
		assert.Contains(t, page, "<h2 id=\"compare\">compare</h2>")
		assert.Contains(t, page, "line 5:")
		assert.Contains(t, page, "the scenario changed over time")
		assert.GreaterOrEqual(t, strings.Count(page, "<svg"), len(reports.KeyFigures))
	})
}

// assertSelfContained: nothing in the page loads from elsewhere.
func assertSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{`src="http`, `href="http`, `src='http`, `href='http`, "@import", "<script src", "url(http"} {
		assert.NotContains(t, page, bad)
	}
}

func TestParseFraction(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  bool
	}{{"10%", 0.1, false}, {"0.25", 0.25, false}, {"250%", 2.5, false}, {"-1", 0, true}, {"ten", 0, true}}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseFraction(tt.in)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.want, got, 1e-12)
		})
	}
}
