package reports

import (
	"fmt"
	"sort"
	"strings"

	"pdsoak/reports/internal/format"
)

// consistency judges consistent_outputs: each probe's ok answers against its first,
// compared on their first prefix characters (0: whole answers).
func (b *Builder) consistency(prefix int) (State, string) {
	if len(b.probes) == 0 {
		return StateNotEvaluated, "no probe prompt was answered (a probe workload sends them)"
	}
	names := make([]string, 0, len(b.probes))
	for n := range b.probes {
		names = append(names, n)
	}
	sort.Strings(names)
	cut := func(s string) string {
		if prefix <= 0 {
			return s
		}
		r := []rune(s)
		return string(r[:min(prefix, len(r))])
	}
	answers, bad := 0, []string{}
	for _, n := range names {
		as := b.probes[n]
		answers += len(as)
		want := cut(as[0].text)
		for _, a := range as[1:] {
			if got := cut(a.text); got != want {
				bad = append(bad, fmt.Sprintf("%s answered %q, first answer (%s) %q", a.id, clip(got, 60), as[0].id, clip(want, 60)))
			}
		}
	}
	scope := "whole answers"
	if prefix > 0 {
		scope = fmt.Sprintf("first %d characters", prefix)
	}
	if len(bad) == 0 {
		return StatePass, fmt.Sprintf("%s of %s agree with their first answer (%s)", format.Plural(answers, "answer"), format.Plural(len(names), "probe"), scope)
	}
	nbad, more := len(bad), ""
	if len(bad) > 3 {
		more = fmt.Sprintf("; and %d more", len(bad)-3)
		bad = bad[:3]
	}
	return StateFail, fmt.Sprintf("%s of %s differ from the probe's first answer (%s): %s%s",
		format.Plural(nbad, "answer"), format.Plural(answers, "answer"), scope, strings.Join(bad, "; "), more)
}

// clip shortens s to at most n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
