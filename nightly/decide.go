package nightly

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"pdsoak/reports"
)

// Exit codes of a night (the harness's own: see harness --help).
const (
	ExitPass  = 0 // every run passed, none regressed
	ExitFail  = 1 // a run failed an assertion or regressed against its baseline
	ExitUsage = 2 // bad command line or a scenario that does not load; nothing ran
	ExitInfra = 3 // no run failed, but one was invalid (target or infrastructure) or inconclusive (contended)
)

// NightsDir is the archive's directory of nights.
const NightsDir = "nights"

var shaRE = regexp.MustCompile(`^[0-9a-zA-Z._-]+$`)

// NightName is the night's directory name: the UTC date and the commit's first 7
// characters ("2026-12-03-1a2b3c4"), or the date alone without a commit.
func NightName(at time.Time, sha string) (string, error) {
	date := at.UTC().Format("2006-01-02")
	if sha == "" {
		return date, nil
	}
	if !shaRE.MatchString(sha) {
		return "", fmt.Errorf("nightly: commit %q: want letters, digits, '.', '_' or '-'", sha)
	}
	if len(sha) > 7 {
		sha = sha[:7]
	}
	return date + "-" + sha, nil
}

// Unique returns name, or name-2, name-3, ... : the first that taken does not hold (a
// night run again on the same day and commit keeps both).
func Unique(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", name, i)
		if !taken(n) {
			return n
		}
	}
}

// NightOf is the night a history line's run belongs to: the directory under nights/
// ("" for a line not written by a night, such as a plain harness run --history).
func NightOf(e reports.HistoryEntry) string {
	parts := strings.Split(path.Clean(strings.ReplaceAll(e.Dir, `\`, "/")), "/")
	if len(parts) != 3 || parts[0] != NightsDir {
		return ""
	}
	return parts[1]
}

// Baselines picks the rolling reference of a run: the last n nights (before tonight,
// newest first) whose run of the same scenario, with the same digest, passed and whose
// directory is still in the archive (exists). A night that failed, or ran a changed
// scenario, is never a bar; the n runs are pooled into one baseline (reports.CompareRuns),
// so one noisy good night is one part of the pool.
func Baselines(history []reports.HistoryEntry, scenario, digest, tonight string, n int, exists func(dir string) bool) []reports.HistoryEntry {
	var out []reports.HistoryEntry
	seen := map[string]bool{}
	for i := len(history) - 1; i >= 0 && len(out) < n; i-- {
		e := history[i]
		night := NightOf(e)
		if night == "" || night == tonight || seen[night] || e.Scenario != scenario || e.Digest != digest || e.Verdict != reports.VerdictPass {
			continue
		}
		if !exists(e.Dir) {
			continue
		}
		seen[night] = true
		out = append(out, e)
	}
	return out
}

// CompareState is how a run's one pooled comparison with its baseline nights came out.
type CompareState string

const (
	CompareNone         CompareState = ""             // no good night to compare with yet
	CompareOK           CompareState = "ok"           // compared: no regression
	CompareRegressed    CompareState = "regressed"    // compared: a regression (exit 1)
	CompareInconclusive CompareState = "inconclusive" // a run was contended or invalid: no answer (exit 3)
)

// StateOf is a comparison's state: inconclusive when a run's contention was above the
// bounds (the machine may explain any difference, so a regression is not claimed) or a
// run was invalid (not whole), else regressed or ok. nil: no comparison.
func StateOf(c *reports.Comparison) CompareState {
	switch {
	case c == nil:
		return CompareNone
	case c.Inconclusive():
		return CompareInconclusive
	case c.Regressed():
		return CompareRegressed
	}
	return CompareOK
}

// Night is an archived night: its directory name and when it started.
type Night struct {
	Name  string
	Start time.Time
}

// Prune returns the nights to delete so that the newest keep remain, oldest first
// (ordered by start, then name). keep <= 0 keeps every night; tonight is never pruned.
func Prune(nights []Night, keep int, tonight string) []string {
	if keep <= 0 || len(nights) <= keep {
		return nil
	}
	sorted := append([]Night(nil), nights...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if !sorted[i].Start.Equal(sorted[j].Start) {
			return sorted[i].Start.Before(sorted[j].Start)
		}
		return sorted[i].Name < sorted[j].Name
	})
	var out []string
	for _, n := range sorted[:len(sorted)-keep] {
		if n.Name != tonight {
			out = append(out, n.Name)
		}
	}
	return out
}

// ExitCode is the night's exit code from each run's own code and its comparison:
// evidence first (a failed assertion or a regression is 1, even when another run was
// invalid or inconclusive), then an invalid run or an inconclusive comparison (3: the
// night could not say, as compare's exit 3 on a contended machine), else 0. A run that
// exited 2 (its scenario was refused at run time) counts as invalid: the night did not
// test it.
func ExitCode(runs []RunResult) int {
	code := ExitPass
	for _, r := range runs {
		switch {
		case r.Code == ExitFail || r.Regressed:
			return ExitFail
		case r.Code != ExitPass, r.Comparison == CompareInconclusive:
			code = ExitInfra
		}
	}
	return code
}

// Refusal says why a baseline night's run cannot be pooled with tonight's: how their
// identities differ (sim vs real, backend, profile, server version, target.launch),
// ports aside (reports.MaskPorts). None: pool it.
func Refusal(base, tonight reports.Identity) []string {
	return base.Differences(tonight)
}
