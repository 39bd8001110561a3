package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestHistoryRoundTripAndProblems(t *testing.T) {
	res := goldenResults(t)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	e := NewHistoryEntry(res, "abc", "commit-1", "runs/1")
	require.NoError(t, AppendHistory(path, e))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n{not json\n{\"scenario\":\"x\",\"digest\":\"d\",\"time\":\"2026-01-01T00:00:00Z\",\"verdict\":\"maybe\"}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, AppendHistory(path, e))

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	got, problems, err := ReadHistory(bytes.NewReader(data))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "golden", got[0].Scenario)
	assert.Equal(t, "commit-1", got[0].Label)
	assert.Equal(t, VerdictFail, got[0].Verdict)
	assert.Equal(t, 20.0, got[0].Figures["requests"])
	require.Len(t, problems, 2)
	assert.Equal(t, 3, problems[0].Line, "the blank line 2 is counted, not reported")
	assert.Equal(t, 4, problems[1].Line)
	assert.ErrorIs(t, problems[1].Err, ErrBadHistoryLine)
	assert.Contains(t, problems[1].String(), `line 4: reports: not a history line: verdict "maybe"`)
}

// TestAppendHistoryConcurrent: lines appended at once by many writers never interleave.
func TestAppendHistoryConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := HistoryEntry{Scenario: "s", Digest: "d", Time: time.Unix(int64(i), 0), Verdict: VerdictPass, Label: strings.Repeat("x", 3000)}
			assert.NoError(t, AppendHistory(path, e))
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	got, problems, err := ReadHistory(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Len(t, got, 50)
}

func FuzzParseHistoryLine(f *testing.F) {
	f.Add([]byte(`{"scenario":"s","digest":"d","time":"2026-12-02T10:00:00Z","verdict":"pass","figures":{"ttft_p50":0.1}}`))
	f.Add([]byte(`{"scenario":"s","digest":"d","time":"2026-12-02T10:00:00Z","verdict":"fail","dir":"../x","label":"abc"}`))
	f.Add([]byte(`{"scenario":""}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseHistoryLine(line)
		if err != nil {
			require.ErrorIs(t, err, ErrBadHistoryLine)
			return
		}
		require.NotEmpty(t, e.Scenario)
		require.NotEmpty(t, e.Digest)
		require.False(t, e.Time.IsZero())
		// What parses is read back the same from a history file, wherever it sits.
		got, problems, err := ReadHistory(bytes.NewReader(append(append([]byte("\n"), line...), '\n')))
		require.NoError(t, err)
		if !bytes.ContainsAny(line, "\n") {
			require.Empty(t, problems)
			require.Len(t, got, 1)
			require.Equal(t, e.Scenario, got[0].Scenario)
		}
	})
}

// TestAppendHistoryAfterTornLine: a run's line was cut short (the disk filled up, or a
// writer died mid-line) and has no newline. The next run's line must still be a line
// of its own: appended straight after the torn bytes, both would be one malformed line
// and the good run would vanish from the trend and never be a baseline.
func TestAppendHistoryAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	good := HistoryEntry{Scenario: "s", Digest: "d", Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Verdict: VerdictPass}
	require.NoError(t, AppendHistory(path, good))
	full, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(full, full[:len(full)/2]...), 0o644)) // torn: no newline

	good.Label = "after the torn line"
	require.NoError(t, AppendHistory(path, good))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	got, problems, err := ReadHistory(bytes.NewReader(data))
	require.NoError(t, err)
	require.Len(t, got, 2, "the line after the torn one is read")
	assert.Equal(t, "after the torn line", got[1].Label)
	require.Len(t, problems, 1, "the torn line alone is reported")
	assert.Equal(t, 2, problems[0].Line)
}

// TestHistoryFiguresOnlyWhatWasMeasured: a night whose requests all failed has no TTFT
// or ITL; a night with no request has no rate and no latency. Their history lines leave
// those figures out, so the trend page skips them rather than plot a perfect 0 s.
func TestHistoryFiguresOnlyWhatWasMeasured(t *testing.T) {
	allFailed := &Results{Verdict: VerdictFail, Scenario: "s", Requests: 4, Outcomes: map[ledger.Outcome]int{ledger.OutcomeHTTPError: 4},
		E2E: Percentiles{Count: 4, P50: 0.01, P99: 0.02}}
	e := NewHistoryEntry(allFailed, "d", "", "")
	for _, f := range []string{"ttft_p50", "ttft_p99", "itl_p99"} {
		assert.NotContains(t, e.Figures, f)
	}
	assert.Equal(t, 0.02, e.Figures["e2e_p99"])
	assert.Equal(t, 0.0, e.Figures["ok_rate"], "a rate over 4 requests is a figure")

	none := NewHistoryEntry(&Results{Verdict: VerdictInvalid, Scenario: "s", Outcomes: map[ledger.Outcome]int{}}, "d", "", "")
	assert.Equal(t, map[string]float64{"requests": 0, "throughput": 0, "silent_drops": 0}, none.Figures)
}
