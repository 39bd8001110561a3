package nightly

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
	"pdsoak/scenarios"
)

// ResolvedFile is the resolved scenario a run leaves in its directory (the CLI's
// harness/cli.ResolvedFile; repeated here, as this package does not import the CLI).
const ResolvedFile = "scenario.json"

// NightFile and SummaryFile are the night's manifest and summary in its directory.
const (
	NightFile   = "night.json"
	SummaryFile = "summary.md"
)

// readVerdict is the run's verdict from results.json ("" when the run wrote none).
func readVerdict(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, reports.ResultsFile))
	if err != nil {
		return ""
	}
	var r struct {
		Verdict string `json:"verdict"`
	}
	if json.Unmarshal(data, &r) != nil {
		return ""
	}
	return r.Verdict
}

// loadRun recomputes a run from its directory, as harness compare does, and digests its
// scenario; it returns the scenario.json bytes too (the run's identity reads them).
func loadRun(dir string, reportConfig ReportConfigFunc) (*reports.Run, string, []byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, ResolvedFile))
	if err != nil {
		return nil, "", nil, fmt.Errorf("nightly: %w", err)
	}
	var sc scenarios.Scenario
	if err := json.Unmarshal(data, &sc); err != nil {
		return nil, "", nil, fmt.Errorf("nightly: %s: %w", filepath.Join(dir, ResolvedFile), err)
	}
	digest, err := reports.ScenarioDigest(data)
	if err != nil {
		return nil, "", nil, fmt.Errorf("nightly: %w", err)
	}
	run, err := reports.ComputeRun(filepath.Join(dir, ledger.EventsFile), reportConfig(&sc))
	if err != nil {
		return nil, "", nil, fmt.Errorf("nightly: %s: %w", dir, err)
	}
	return run, digest, data, nil
}

// CompareDir is where a run's pooled comparison is written, inside the run's directory.
const CompareDir = "compare"

// compareRun compares tonight's run rr with its baseline nights pooled into one
// (reports.CompareRuns), writes compare.md and compare.html into <run>/compare/, and
// fills rr's baselines, comparison state, regressions and contention. A baseline night
// whose run was made against something else (Refusal: sim vs real, backend, profile,
// server version, target.launch ports aside), or was contended above the compare
// options' bounds, is listed as refused and not pooled; one that cannot be read is
// logged and left out. No usable baseline: no comparison.
func compareRun(archive string, history []reports.HistoryEntry, night string, rr *RunResult, reportConfig ReportConfigFunc, o options) {
	dir := filepath.Join(archive, filepath.FromSlash(rr.Dir))
	tonight, digest, data, err := loadRun(dir, reportConfig)
	if err != nil {
		o.logger.Warn("compare: tonight's run", "dir", dir, "err", err)
		return
	}
	id, err := reports.IdentityOf(tonight.Results, data)
	if err != nil {
		o.logger.Warn("compare: tonight's run", "dir", dir, "err", err)
		return
	}
	exists := func(d string) bool {
		_, err := os.Stat(filepath.Join(archive, filepath.FromSlash(d), ledger.EventsFile))
		return err == nil
	}
	var pool []*reports.Run
	var poolDir string
	for _, b := range Baselines(history, rr.Scenario, digest, night, o.baselineNights, exists) {
		bdir := filepath.Join(archive, filepath.FromSlash(b.Dir))
		base, bd, bdata, err := loadRun(bdir, reportConfig)
		if err != nil {
			o.logger.Warn("compare: baseline", "dir", bdir, "err", err)
			continue
		}
		entry := Baseline{Night: NightOf(b), Dir: b.Dir}
		bid, err := reports.IdentityOf(base.Results, bdata)
		switch {
		case err != nil:
			entry.Refused = []string{err.Error()}
		case bd != digest:
			entry.Refused = []string{"its scenario differs (digest " + bd + " vs " + digest + ")"}
		default:
			entry.Refused = Refusal(bid, id)
		}
		// A night that passed on a busy machine is no bar: pooled, it would make every
		// comparison of the next nights inconclusive, however quiet they were.
		if ex := base.Results.Contention.Exceeded(o.compare.Contention); len(entry.Refused) == 0 && len(ex) > 0 {
			entry.Refused = []string{"its run was contended: " + strings.Join(ex, ", ")}
		}
		rr.Baselines = append(rr.Baselines, entry)
		if len(entry.Refused) > 0 {
			o.logger.Warn("compare: baseline refused", "night", entry.Night, "differences", strings.Join(entry.Refused, "; "))
			continue
		}
		if pool == nil {
			poolDir = bdir // the newest pooled night: its timeline and report link
		}
		pool = append(pool, base)
	}
	if len(pool) == 0 {
		return
	}
	c, err := reports.CompareRuns(pool, tonight, digest, o.compare)
	if err != nil {
		o.logger.Warn("compare", "dir", dir, "err", err)
		return
	}
	// The answer first: files that cannot be written (a full disk) must not lose it.
	rr.Comparison = StateOf(c)
	rr.Regressed = rr.Comparison == CompareRegressed
	rr.Regressions = c.Regressions
	rr.Contended = c.Contended
	rr.Invalid = c.Invalid
	out := filepath.Join(dir, CompareDir)
	if err := writeCompare(out, c, pool[0], tonight, poolDir, dir); err != nil {
		o.logger.Warn("compare: write", "dir", out, "err", err)
		return
	}
	rel, _ := filepath.Rel(archive, filepath.Join(out, reports.CompareHTMLFile))
	rr.Compare = filepath.ToSlash(rel)
}

func writeCompare(out string, c *reports.Comparison, base, nw *reports.Run, baseDir, newDir string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	link := func(runDir string) string {
		if _, err := os.Stat(filepath.Join(runDir, reports.HTMLFile)); err != nil {
			return ""
		}
		rel, err := filepath.Rel(out, filepath.Join(runDir, reports.HTMLFile))
		if err != nil {
			return ""
		}
		return filepath.ToSlash(rel)
	}
	c.BaseReport, c.NewReport = link(baseDir), link(newDir)
	var md, page bytes.Buffer
	if err := render.WriteCompareMarkdown(&md, c); err != nil {
		return err
	}
	if err := render.WriteCompareHTML(&page, c, base.Results.Timeline(), nw.Results.Timeline()); err != nil {
		return err
	}
	for name, data := range map[string][]byte{reports.CompareMarkdownFile: md.Bytes(), reports.CompareHTMLFile: page.Bytes()} {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return fmt.Errorf("nightly: %w", err)
		}
	}
	return nil
}

// prune deletes the nights beyond the retention count; their history lines stay (the
// trend keeps their figures, without a link).
func prune(archive, tonight string, o options) []string {
	entries, err := os.ReadDir(filepath.Join(archive, NightsDir))
	if err != nil {
		o.logger.Warn("prune", "err", err)
		return nil
	}
	var nights []Night
	for _, e := range entries {
		if e.IsDir() {
			nights = append(nights, Night{Name: e.Name(), Start: nightStart(filepath.Join(archive, NightsDir, e.Name()), e)})
		}
	}
	var done []string
	for _, n := range Prune(nights, o.keep, tonight) {
		if err := os.RemoveAll(filepath.Join(archive, NightsDir, n)); err != nil {
			o.logger.Warn("prune", "night", n, "err", err)
			continue
		}
		done = append(done, n)
	}
	return done
}

// writeTrend renders ARCHIVE/index.html from the whole history; each row links its own
// night's report.html when that night is still archived.
func writeTrend(archive string) error {
	entries, problems, err := readHistoryProblems(filepath.Join(archive, HistoryFile))
	if err != nil {
		return err
	}
	link := func(e reports.HistoryEntry) string {
		if NightOf(e) == "" {
			return ""
		}
		rel := filepath.ToSlash(filepath.Join(filepath.FromSlash(e.Dir), reports.HTMLFile))
		if _, err := os.Stat(filepath.Join(archive, filepath.FromSlash(rel))); err != nil {
			return ""
		}
		return rel
	}
	var buf bytes.Buffer
	if err := render.WriteTrend(&buf, entries, problems, link); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	if err := os.WriteFile(filepath.Join(archive, reports.TrendFile), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	return nil
}

// writeNight writes night.json and summary.md, and appends the summary to the step
// summary file when one is set.
func writeNight(archive, nightDir string, res *Result, o options) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	if err := os.WriteFile(filepath.Join(nightDir, NightFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	var md bytes.Buffer
	WriteSummary(&md, res, func(rel string) string { return readSummary(filepath.Join(archive, filepath.FromSlash(rel))) })
	if err := os.WriteFile(filepath.Join(nightDir, SummaryFile), md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("nightly: %w", err)
	}
	if o.stepSummary != "" {
		f, err := os.OpenFile(o.stepSummary, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("nightly: step summary: %w", err)
		}
		_, werr := f.Write(md.Bytes())
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("nightly: step summary: %w", werr)
		}
	}
	return nil
}

func readSummary(runDir string) string {
	data, err := os.ReadFile(filepath.Join(runDir, reports.SummaryFile))
	if err != nil {
		return ""
	}
	return string(data)
}

// nightStart is when a night started: its manifest's start, else (a night interrupted
// before writing one) its directory's modification time.
func nightStart(dir string, e os.DirEntry) time.Time {
	if data, err := os.ReadFile(filepath.Join(dir, NightFile)); err == nil {
		var r Result
		if json.Unmarshal(data, &r) == nil && !r.Start.IsZero() {
			return r.Start
		}
	}
	if info, err := e.Info(); err == nil {
		return info.ModTime()
	}
	return time.Time{}
}
