package render

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// renderAll renders every text output of r (report.html's charts are too slow for a
// fuzz loop; TestReportHTML and the golden tests cover it).
func renderAll(t *testing.T, r *reports.Results) map[string]string {
	out := map[string]string{}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"json":  func(b *bytes.Buffer) error { return WriteJSON(b, r) },
		"junit": func(b *bytes.Buffer) error { return WriteJUnit(b, r) },
		"md":    func(b *bytes.Buffer) error { return WriteMarkdown(b, r) },
		"table": func(b *bytes.Buffer) error { return WriteTable(b, r) },
	} {
		var b bytes.Buffer
		require.NoError(t, write(&b), name)
		out[name] = b.String()
	}
	return out
}

// FuzzRenderLedger: whatever ledger it reads, every renderer succeeds, twice with the
// same bytes, junit.xml decodes and fails exactly when the verdict is not pass, and
// summary.md's heading says the verdict.
func FuzzRenderLedger(f *testing.F) {
	data, _ := os.ReadFile("../testdata/events.jsonl")
	f.Add(data)
	f.Add([]byte("{\"type\":\"done\",\"request_id\":\"a|\\n<b>\",\"outcome\":\"stalled\"}\n{\"ty"))
	f.Add([]byte(`{"type":"fault_start","fault":"]]><x>\u0001","target":"\u0000"}` + "\n" + `{"type":"what_is_this"}` + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg := reports.Config{Assertions: []string{reports.AssertNoSilentDrops, reports.AssertRecovery, "p99(ttft) < 1s"}}
		evs, _, _ := ledger.ReadAll(bytes.NewReader(in))
		build := func() *reports.Results { return reports.Compute(evs, cfg) }
		r := build()
		first := renderAll(t, r)
		require.Equal(t, first, renderAll(t, build()), "same ledger, different outputs")
		fails, errs := junitCounts(t, r)
		require.Equal(t, r.Verdict != reports.VerdictPass, fails+errs > 0, "verdict %s, junit failures %d errors %d", r.Verdict, fails, errs)
		head, _, _ := strings.Cut(first["md"], "\n")
		require.True(t, strings.HasSuffix(head, ": "+verdictWord(r.Verdict)), head)
	})
}
