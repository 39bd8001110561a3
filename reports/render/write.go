package render

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// WriteAll writes results.json, junit.xml, summary.md and report.html into dir.
func WriteAll(dir string, r *reports.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	for _, out := range []struct {
		name  string
		write func(io.Writer, *reports.Results) error
	}{{reports.ResultsFile, WriteJSON}, {reports.JUnitFile, WriteJUnit}, {reports.SummaryFile, WriteMarkdown}} {
		var buf bytes.Buffer
		if err := out.write(&buf, r); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, out.name), buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	return WriteHTMLFile(dir, r, r.Timeline())
}

// WriteJSON writes results.json.
func WriteJSON(w io.Writer, r *reports.Results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("render: write results: %w", err)
	}
	return nil
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes junit.xml: one test case per assertion, three per fault (see
// faultCases), plus a "valid_run" case with an error when the run is invalid.
func WriteJUnit(w io.Writer, r *reports.Results) error {
	class := "pdsoak." + r.Scenario
	secs := fmt.Sprintf("%.3f", r.Duration)
	s := junitSuite{
		Name: "pdsoak/" + r.Scenario,
		Time: secs,
		Properties: []junitProperty{
			{"verdict", string(r.Verdict)}, {"seed", fmt.Sprint(r.Seed)}, {"target", r.Target},
			{"requests", fmt.Sprint(r.Requests)}, {"silent_drops", fmt.Sprint(r.SilentDrops)},
		},
	}
	if !r.Start.IsZero() {
		s.Timestamp = r.Start.UTC().Format("2006-01-02T15:04:05")
	}
	for _, a := range r.Assertions {
		c := junitCase{Name: a.Name, Classname: class, Time: "0", SystemOut: a.Detail}
		switch a.State {
		case reports.StatePass:
		case reports.StateNotEvaluated:
			// An error, not a skip: CI must not count it as green.
			c.Error = &junitProblem{Message: "not evaluated: " + a.Detail, Type: "NotEvaluated", Text: a.Detail}
			c.SystemOut = ""
			s.Errors++
		default:
			c.Failure = &junitProblem{Message: a.Detail, Type: "AssertionFailed", Text: a.Detail}
			c.SystemOut = ""
			s.Failures++
		}
		s.Cases = append(s.Cases, c)
	}
	judged := slices.ContainsFunc(r.Assertions, func(a reports.AssertionResult) bool { return a.Name == reports.AssertRecovery })
	for _, f := range r.Faults {
		for _, c := range faultCases(f, class, judged) {
			switch {
			case c.Failure != nil:
				s.Failures++
			case c.Error != nil:
				s.Errors++
			}
			s.Cases = append(s.Cases, c)
		}
	}
	if len(r.InvalidReasons) > 0 {
		msg := strings.Join(r.InvalidReasons, "; ")
		s.Cases = append(s.Cases, junitCase{Name: "valid_run", Classname: class, Time: "0",
			Error: &junitProblem{Message: msg, Type: "InvalidRun", Text: msg}})
		s.Errors++
	}
	s.Tests = len(s.Cases)
	s.SystemOut = outcomeLine(r)
	doc := junitSuites{Name: "pdsoak", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: secs, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("render: write junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("render: write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// faultCases are a fault's JUnit test cases: verified (did it take effect; its time is
// how long it was active), recovered and time_to_recover (their time is the seconds from
// the fault's stop to recovery). A fault that did not take effect is an error (the run is
// invalid); one that did not recover is a failure; what could not be measured is an error.
// That is when judged (the recovery assertion is listed): otherwise the verdict ignores
// recovery, and so do they, saying it in their output rather than turn a PASS red.
func faultCases(f reports.FaultResult, class string, judged bool) []junitCase {
	name := "fault " + f.Name
	see := fmt.Sprintf(" (fault %s: %s on %s; see %s)", f.Name, f.Type, f.Target, reports.HTMLFile)
	active := "0"
	if f.Stop != nil {
		active = fmt.Sprintf("%.3f", *f.Stop-f.Start)
	}
	verified := junitCase{Name: name + ": verified", Classname: class, Time: active}
	switch {
	case f.Verified == nil:
		verified.SystemOut = "the fault type has no verification" + see
	case *f.Verified:
		verified.SystemOut = format.FirstNonEmpty(f.Detail, "took effect") + see
	default:
		msg := "did not take effect: " + format.FirstNonEmpty(f.Detail, "no detail") + see
		verified.Error = &junitProblem{Message: msg, Type: "FaultNotVerified", Text: msg}
	}
	ttr := "0"
	if f.TimeToRecover != nil {
		ttr = fmt.Sprintf("%.3f", *f.TimeToRecover)
	}
	recovered := junitCase{Name: name + ": recovered", Classname: class, Time: ttr}
	timeTo := junitCase{Name: name + ": time_to_recover", Classname: class, Time: ttr}
	switch {
	case f.Stop == nil:
		msg := "never reverted during load: recovery not measurable" + see
		recovered.Error = &junitProblem{Message: msg, Type: "NotEvaluated", Text: msg}
		timeTo.Error = recovered.Error
	case f.Recovered == nil:
		msg := "no requests after the fault stopped: recovery not measurable" + see
		recovered.Error = &junitProblem{Message: msg, Type: "NotEvaluated", Text: msg}
		timeTo.Error = recovered.Error
	case *f.Recovered:
		recovered.SystemOut = fmt.Sprintf("success rate recovered %s after the fault stopped%s", format.Seconds(*f.TimeToRecover), see)
		timeTo.SystemOut = fmt.Sprintf("%.3f s%s", *f.TimeToRecover, see)
	default:
		msg := "the success rate did not recover after the fault stopped" + see
		recovered.Failure = &junitProblem{Message: msg, Type: "NotRecovered", Text: msg}
		timeTo.Failure = recovered.Failure
	}
	if !judged {
		for _, c := range []*junitCase{&recovered, &timeTo} {
			if p := cmp.Or(c.Failure, c.Error); p != nil {
				c.SystemOut = p.Text + " (recovery is not asserted)"
				c.Failure, c.Error = nil, nil
			}
		}
	}
	return []junitCase{verified, recovered, timeTo}
}

func outcomeLine(r *reports.Results) string {
	parts := make([]string, 0, len(ledger.Outcomes))
	for _, o := range ledger.Outcomes {
		parts = append(parts, fmt.Sprintf("%s=%d", o, r.Outcomes[o]))
	}
	return strings.Join(parts, " ") + causeLine(r)
}

func verdictWord(v reports.Verdict) string {
	switch v {
	case reports.VerdictPass:
		return "PASS"
	case reports.VerdictFail:
		return "FAIL"
	}
	return "INVALID"
}

func mark(s reports.State) string {
	switch s {
	case reports.StatePass:
		return "pass"
	case reports.StateNotEvaluated:
		return "NOT EVALUATED"
	}
	return "FAIL"
}

// VerdictLine is the one-line verdict (harness run --quiet): the verdict, the scenario,
// the counts, and why it failed or is invalid.
func VerdictLine(r *reports.Results) string {
	s := fmt.Sprintf("%s %s: %s, %s", verdictWord(r.Verdict), r.Scenario, format.Plural(r.Requests, "request"), format.Plural(r.SilentDrops, "silent drop"))
	switch r.Verdict {
	case reports.VerdictFail:
		s += "; failed: " + strings.Join(r.Failed(), ", ")
	case reports.VerdictInvalid:
		s += "; " + strings.Join(r.InvalidReasons, "; ")
	}
	return oneLine(s)
}

// provenanceLine is summary.md's line about where and how the run was made, escaped.
func provenanceLine(p *reports.Provenance) string {
	var parts []string
	add := func(label, v string) {
		if v != "" {
			parts = append(parts, label+mdEscape(v))
		}
	}
	h := p.HarnessVersion
	if p.Revision != "" {
		h = strings.TrimSpace(h + " (" + p.Revision + ")")
	}
	add("harness ", h)
	add("", p.GoVersion)
	add("host ", p.Host)
	add("", p.OS)
	add("CPU ", p.CPU)
	if len(p.GPUs) > 0 {
		add("GPUs ", strings.Join(p.GPUs, ", "))
	}
	add("server ", p.ServerVersion)
	if ids := modelIDs(p.Models); len(ids) > 0 {
		add("models ", strings.Join(ids, ", "))
	}
	if len(p.CommandLine) > 0 {
		parts = append(parts, "command "+mdSpan(strings.Join(p.CommandLine, " ")))
	}
	return strings.Join(parts, "; ")
}

// modelIDs reads the model ids of an OpenAI /v1/models answer ({"data": [{"id"}]}).
func modelIDs(raw json.RawMessage) []string {
	var m struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var ids []string
	for _, d := range m.Data {
		if d.ID != "" {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// WriteMarkdown writes summary.md.
func WriteMarkdown(w io.Writer, r *reports.Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n\n", mdEscape(r.Scenario), verdictWord(r.Verdict))
	fmt.Fprintf(&b, "- target: %s\n- seed: %d\n- duration: %.1f s\n- requests: %d (%.2f/s)\n- silent drops: **%d**\n",
		mdSpan(r.Target), r.Seed, r.Duration, r.Requests, r.Throughput, r.SilentDrops)
	if r.Mode == ledger.ModeSim {
		b.WriteString("- mode: **simulated** (`harness run --sim`: virtual clock, times are virtual)\n")
	}
	if r.GPU != nil {
		fmt.Fprintf(&b, "- %s\n", gpuLine(r.GPU))
	}
	if r.Provenance != nil {
		if line := provenanceLine(r.Provenance); line != "" {
			fmt.Fprintf(&b, "- provenance: %s\n", line)
		}
	}
	if len(r.InvalidReasons) > 0 {
		b.WriteString("\n**The run is invalid:**\n\n")
		for _, s := range r.InvalidReasons {
			fmt.Fprintf(&b, "- %s\n", mdEscape(s))
		}
	}
	b.WriteString("\n## Assertions\n\n| assertion | result | detail |\n|---|---|---|\n")
	for _, a := range r.Assertions {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCode(a.Name), mark(a.State), mdEscape(a.Detail))
	}
	b.WriteString("\n## Outcomes\n\n| outcome | count |\n|---|---:|\n")
	for _, o := range ledger.Outcomes {
		fmt.Fprintf(&b, "| %s | %d |\n", o, r.Outcomes[o])
	}
	b.WriteString("\n## Latency (seconds)\n\n| | count | p50 | p90 | p95 | p99 | max | mean |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range []struct {
		name string
		p    reports.Percentiles
	}{{"ttft", r.TTFT}, {"itl", r.ITL}, {"e2e", r.E2E}, {"harness lag", r.Lag}} {
		fmt.Fprintf(&b, "| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", l.name, l.p.Count, l.p.P50, l.p.P90, l.p.P95, l.p.P99, l.p.Max, l.p.Mean)
	}
	if len(r.ByWorkload) > 0 {
		b.WriteString("\n## Per workload\n\n| workload | requests | ok | silent drops | other outcomes | ttft p50 | ttft p99 | itl p99 | e2e p50 | e2e p99 |\n|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
		for _, name := range format.SortedKeys(r.ByWorkload) {
			w := r.ByWorkload[name]
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f |\n", mdEscape(name), w.Requests, w.Outcomes[ledger.OutcomeOK], w.SilentDrops,
				otherOutcomes(w.Outcomes), w.TTFT.P50, w.TTFT.P99, w.ITL.P99, w.E2E.P50, w.E2E.P99)
		}
	}
	b.WriteString(arrivalsMarkdown(r))
	b.WriteString(causesMarkdown(r))
	if len(r.Faults) > 0 {
		b.WriteString("\n## Faults\n\n| fault | type | target | start | stop | verified | time to recover |\n|---|---|---|---:|---:|---|---:|\n")
		for _, f := range r.Faults {
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s | %s | %s |\n", mdEscape(f.Name), mdEscape(f.Type), mdEscape(f.Target), f.Start,
				optSeconds(f.Stop, "%.1f"), optBool(f.Verified), recoveryCell(f))
		}
	}
	if r.SilentDrops > 0 {
		b.WriteString("\n## Silent drops\n\n" + diagnosisLine(r) + "| request | workload | phase | age (s) | server said |\n|---|---|---|---:|---|\n")
		shown := r.Drops[:min(50, len(r.Drops))]
		for _, d := range shown {
			fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s |\n", mdCode(d.RequestID), mdEscape(d.Workload), mdEscape(string(d.Phase)), d.Age, debugCell(d.ServerDebug))
		}
		if more := moreDrops(r, len(shown)); more != "" {
			b.WriteString("\n" + more + "\n")
		}
	}
	b.WriteString(pdMarkdown(r)) // pd_path and health_lies (pdmarkdown.go)
	if r.Leak != nil && r.Leak.State == reports.StateNotEvaluated {
		fmt.Fprintf(&b, "\n## Leak check\n\nNot evaluated: %s\n", mdEscape(r.Leak.Detail))
	}
	if r.Leak != nil && len(r.Leak.Metrics) > 0 {
		b.WriteString("\n## Gauges after drain\n\n| gauge | value |\n|---|---:|\n")
		keys := make([]string, 0, len(r.Leak.Metrics))
		for k := range r.Leak.Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "| %s | %g |\n", mdCode(k), r.Leak.Metrics[k])
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", mdEscape(n))
		}
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("render: write summary: %w", err)
	}
	return nil
}

// otherOutcomes lists the outcomes other than ok that occurred ("rejected 3, stalled 1").
func otherOutcomes(m map[ledger.Outcome]int) string {
	var parts []string
	for _, o := range ledger.Outcomes {
		if o != ledger.OutcomeOK && m[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, m[o]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func optSeconds(p *float64, f string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(f, *p)
}

func optBool(p *bool) string {
	if p == nil {
		return "-"
	}
	if *p {
		return "yes"
	}
	return "NO"
}

func recoveryCell(f reports.FaultResult) string {
	switch {
	case f.Recovered == nil:
		return "-"
	case *f.Recovered:
		return format.Seconds(*f.TimeToRecover)
	}
	return "not recovered"
}

// moreDrops says how many silent drops a list of the first shown left out, and how
// many results.json holds (Config.MaxDrops bounds them); "" when none was left out.
func moreDrops(r *reports.Results, shown int) string {
	if r.SilentDrops <= shown {
		return ""
	}
	return fmt.Sprintf("… %d more silent drops (results.json lists the first %d)", r.SilentDrops-shown, len(r.Drops))
}

// serverSaid summarises a drop's server debug info: its "where" field when the harness
// provided one (a one-line summary across processes), else the compacted JSON.
func serverSaid(raw json.RawMessage, limit int) string {
	if len(raw) == 0 {
		return ""
	}
	var obj struct {
		Where string `json:"where"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Where != "" {
		return truncate(obj.Where, limit)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return ""
	}
	return truncate(compact.String(), limit)
}

// truncate cuts s to at most n bytes, never inside a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func debugCell(raw json.RawMessage) string {
	if s := serverSaid(raw, 300); s != "" {
		return mdCode(s)
	}
	return "-"
}

// mdEscape makes text from the server or the user (error bodies, names, details) safe
// in a table cell, a list item or a heading: it stays on its line (a newline would end
// the table or forge a heading), its pipes do not split cells, and it opens no HTML.
func mdEscape(s string) string { return mdText.Replace(oneLine(s)) }

// mdCode is mdEscape for a code span in a table cell: backslash escapes do not work
// there, but GFM's escaped pipe does.
func mdCode(s string) string { return strings.ReplaceAll(mdSpan(s), "|", `\|`) }

// mdSpan is s as a code span outside a table.
func mdSpan(s string) string { return "`" + strings.ReplaceAll(oneLine(s), "`", "'") + "`" }

var mdText = strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", "`", "'")

// mdLine puts s on one line of valid UTF-8 with no control characters.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// WriteTable prints the end-of-run summary table for a terminal.
func WriteTable(w io.Writer, r *reports.Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s  %s  (seed %d, target %s)\n", verdictWord(r.Verdict), oneLine(r.Scenario), r.Seed, oneLine(r.Target))
	fmt.Fprintf(&b, "%s in %.1fs (%.2f/s), %s\n\n", format.Plural(r.Requests, "request"), r.Duration, r.Throughput, format.Plural(r.SilentDrops, "silent drop"))
	if r.GPU != nil {
		fmt.Fprintf(&b, "%s\n\n", strings.ReplaceAll(gpuLine(r.GPU), "**", ""))
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OUTCOME\tCOUNT\t\tLATENCY\tP50\tP90\tP95\tP99\tMAX")
	lat := []struct {
		name string
		p    reports.Percentiles
	}{{"ttft", r.TTFT}, {"itl", r.ITL}, {"e2e", r.E2E}}
	for i, o := range ledger.Outcomes {
		row := fmt.Sprintf("%s\t%d\t", o, r.Outcomes[o])
		if i < len(lat) {
			l := lat[i].p
			row += fmt.Sprintf("\t%s\t%.3fs\t%.3fs\t%.3fs\t%.3fs\t%.3fs", lat[i].name, l.P50, l.P90, l.P95, l.P99, l.Max)
		} else {
			row += "\t\t\t\t\t\t"
		}
		fmt.Fprintln(tw, row)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ASSERTION\tRESULT\tDETAIL")
	for _, a := range r.Assertions {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", oneLine(a.Name), mark(a.State), oneLine(a.Detail))
	}
	if len(r.Faults) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "FAULT\tTYPE\tTARGET\tVERIFIED\tRECOVERY")
		for _, f := range r.Faults {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(f.Name), oneLine(f.Type), oneLine(f.Target), optBool(f.Verified), recoveryCell(f))
		}
	}
	if len(r.Drops) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "SILENT DROP\tPHASE\tAGE\tSERVER SAID")
		for _, d := range r.Drops[:min(10, len(r.Drops))] {
			said := oneLine(serverSaid(d.ServerDebug, 160))
			if said == "" {
				said = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%s\n", oneLine(d.RequestID), oneLine(string(d.Phase)), d.Age, said)
		}
		if more := moreDrops(r, min(10, len(r.Drops))); more != "" {
			fmt.Fprintf(tw, "%s\t\t\t\n", more)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.InvalidReasons) > 0 {
		b.WriteString("\n")
	}
	for _, s := range r.InvalidReasons {
		fmt.Fprintf(&b, "INVALID: %s\n", oneLine(s))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
