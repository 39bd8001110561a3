package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// hostile is text a server under test or a user can put in a report: table and list
// breakers, a fake heading, HTML, a control character and invalid UTF-8.
const hostile = "a|b\\|c\n# x: PASS\n| forged | row |\r`code`<script>alert(1)</script>\x00\x1b\xff"

// hostileResults is an invalid run whose every free-text field is hostile.
func hostileResults() *reports.Results {
	debug, _ := json.Marshal(map[string]string{"where": hostile})
	return &reports.Results{
		Verdict: reports.VerdictInvalid, Scenario: hostile, Target: hostile,
		Outcomes:       map[ledger.Outcome]int{ledger.OutcomeStalled: 1},
		Requests:       1,
		SilentDrops:    1,
		InvalidReasons: []string{"run failed: " + hostile},
		Assertions:     []reports.AssertionResult{{Name: hostile, State: reports.StateNotEvaluated, Detail: hostile}},
		Faults:         []reports.FaultResult{{Name: hostile, Type: hostile, Target: hostile, Detail: hostile}},
		Drops:          []reports.SilentDrop{{RequestID: hostile, Workload: hostile, Phase: ledger.Phase(hostile), ServerDebug: debug}},
		ByWorkload:     map[string]reports.WorkloadResult{hostile: {Outcomes: map[ledger.Outcome]int{}}},
		HealthLies:     []reports.HealthLie{{Source: hostile, Detail: hostile}},
		Liveness:       []reports.LivenessResult{{Source: hostile}, {Source: "router", Fault: hostile}},
		Causes:         map[string]int{ledger.CauseFaultPrefix + hostile: 1},
		Leak:           &reports.CheckResult{State: reports.StateNotEvaluated, Detail: hostile, Metrics: map[string]float64{hostile: 1}},
		Notes:          []string{hostile},
		Provenance:     &reports.Provenance{Provenance: ledger.Provenance{Host: hostile, CommandLine: []string{"harness", hostile}}, ServerVersion: hostile},
	}
}

// mdCells counts a table row's cells as GitHub (cmark-gfm) splits them: on every pipe
// not preceded by a backslash, in code spans too.
func mdCells(row string) int {
	n := 0
	for i := 0; i < len(row); i++ {
		if row[i] == '|' && (i == 0 || row[i-1] != '\\') {
			n++
		}
	}
	return n - 1
}

var codeSpan = regexp.MustCompile("`[^`\n]*`")

// checkMarkdown fails when text broke out of its place: a second level-1 heading,
// a table row with the wrong number of cells or a line inside a table that is no row,
// raw HTML outside a code span, a control character or invalid UTF-8.
func checkMarkdown(t *testing.T, md string) {
	t.Helper()
	require.True(t, utf8.ValidString(md), "invalid UTF-8")
	for _, r := range md {
		require.False(t, unicode.IsControl(r) && r != '\n', "control character %q", r)
	}
	lines := strings.Split(md, "\n")
	cells := -1 // the current table's width; -1 outside a table
	for i, l := range lines {
		if i > 0 {
			require.False(t, strings.HasPrefix(l, "# "), "line %d is a forged heading: %q", i+1, l)
		}
		require.NotContains(t, codeSpan.ReplaceAllString(l, ""), "<", "line %d has raw HTML: %q", i+1, l)
		switch {
		case l == "":
			cells = -1
		case cells < 0 && strings.HasPrefix(l, "|") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|---"):
			cells = mdCells(l)
		case cells >= 0:
			require.True(t, strings.HasPrefix(l, "|"), "line %d inside a table is no row: %q", i+1, l)
			require.Equal(t, cells, mdCells(l), "line %d: %q", i+1, l)
		}
	}
}

// TestMarkdownEscapesHostileText: what the server or the user wrote stays inside its
// cell, list item or heading, and the invalid run is not called PASS in a heading.
func TestMarkdownEscapesHostileText(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, hostileResults()))
	md := buf.String()
	checkMarkdown(t, md)
	require.True(t, strings.HasSuffix(strings.SplitN(md, "\n", 2)[0], ": INVALID"), md)
}

// TestTableWritesNoControlCharacters: the terminal table and the verdict line (harness
// run's last words, a CI log) print server and user text without escape sequences or line breaks that
// could rewrite the terminal or forge a line such as "PASS".
func TestTableWritesNoControlCharacters(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, hostileResults()))
	out := buf.String() + VerdictLine(hostileResults())
	require.True(t, utf8.ValidString(out), "invalid UTF-8")
	for _, r := range out {
		require.False(t, unicode.IsControl(r) && r != '\n', "control character %q in %q", r, out)
	}
	for _, l := range strings.Split(out, "\n") {
		require.False(t, strings.HasPrefix(l, "# x: PASS") || strings.HasPrefix(l, "| forged"), "forged line %q", l)
	}
}

// TestDropListSaysWhatItLeftOut: summary.md and the table list a few silent drops and
// say how many more there were and how many of them results.json holds (Config.MaxDrops
// bounds its list), also when fewer were kept than they would show.
func TestDropListSaysWhatItLeftOut(t *testing.T) {
	res := func(total, kept int) *reports.Results {
		r := &reports.Results{Verdict: reports.VerdictFail, Scenario: "d", SilentDrops: total, Outcomes: map[ledger.Outcome]int{ledger.OutcomeStalled: total}}
		for i := range kept {
			r.Drops = append(r.Drops, reports.SilentDrop{RequestID: fmt.Sprint("r", i), Outcome: ledger.OutcomeStalled})
		}
		return r
	}
	tests := []struct {
		name        string
		total, kept int
		md, table   string
	}{
		{"beyond what results.json keeps", 1500, 1000, "… 1450 more silent drops (results.json lists the first 1000)", "… 1490 more silent drops (results.json lists the first 1000)"},
		{"fewer kept than shown", 30, 5, "… 25 more silent drops (results.json lists the first 5)", "… 25 more silent drops (results.json lists the first 5)"},
		{"all shown", 3, 3, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var md, tab bytes.Buffer
			require.NoError(t, WriteMarkdown(&md, res(tt.total, tt.kept)))
			require.NoError(t, WriteTable(&tab, res(tt.total, tt.kept)))
			if tt.md == "" {
				require.NotContains(t, md.String()+tab.String(), "more silent drops")
				return
			}
			require.Contains(t, md.String(), tt.md)
			require.Contains(t, tab.String(), tt.table)
		})
	}
}
