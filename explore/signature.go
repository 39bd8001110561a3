package explore

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"pdsoak/reports"
)

// Signature names how a run failed: its failed assertions, sorted and joined by "+",
// then "@" and the stages where the server held its silent drops (reports' DropStages,
// from the done events' server_debug), each as process role and stage, e.g.
// "no_silent_drops@decode:prealloc". The worker's index is left out, so a wedge in
// decode-0 and one in decode-1 are one signature. Empty for a run that did not fail.
func Signature(r *reports.Results) string {
	if r == nil || r.Verdict != reports.VerdictFail {
		return ""
	}
	failed := slices.Clone(r.Failed())
	slices.Sort(failed)
	failed = slices.Compact(failed)
	sig := strings.Join(failed, "+")
	stages := map[string]bool{}
	for st := range r.DropStages {
		stages[stageKey(st)] = true
	}
	if len(stages) > 0 {
		sig += "@" + strings.Join(slices.Sorted(maps.Keys(stages)), ",")
	}
	return sig
}

var instanceRE = regexp.MustCompile(`-[0-9]+$`)

// stageKey turns reports' "decode-0: prealloc" into "decode:prealloc".
func stageKey(st string) string {
	proc, stage, ok := strings.Cut(st, ": ")
	if !ok {
		return strings.TrimSpace(st)
	}
	return instanceRE.ReplaceAllString(strings.TrimSpace(proc), "") + ":" + strings.TrimSpace(stage)
}

var unsafeRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// FileName is the shrunk scenario's file name for a signature:
// shrunk-no_silent_drops-decode-prealloc.yaml.
func FileName(sig string) string {
	s := strings.Trim(unsafeRE.ReplaceAllString(sig, "-"), "-.")
	if len(s) > 100 {
		s = s[:100]
	}
	if s == "" {
		s = "failure"
	}
	return "shrunk-" + s + ".yaml"
}
