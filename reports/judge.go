package reports

import (
	"fmt"
	"strings"

	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// The assertions a Builder judges: the configured list (or the defaults) and each one's
// state from the figures of the results.

func (b *Builder) assertions() []Assertion {
	list := b.cfg.Assertions
	if list == nil {
		list = []string{AssertNoSilentDrops, AssertValidResponses}
	}
	out := make([]Assertion, 0, len(list))
	for _, s := range list {
		a, err := ParseAssertion(s)
		if err != nil {
			// Scenarios validate assertions before a run; a bad one cannot be evaluated.
			a = Assertion{Raw: s, Name: s, Op: "invalid: " + strings.TrimPrefix(err.Error(), "assertion: ")}
		}
		out = append(out, a)
	}
	return out
}

func (b *Builder) evaluate(a Assertion, r *Results) AssertionResult {
	state, detail := b.judge(a, r)
	return AssertionResult{Name: a.Name, State: state, Passed: state == StatePass, Detail: detail}
}

// judge decides one assertion: pass, fail, or not_evaluated with the reason.
func (b *Builder) judge(a Assertion, r *Results) (State, string) {
	if strings.HasPrefix(a.Op, "invalid: ") {
		return StateNotEvaluated, strings.TrimPrefix(a.Op, "invalid: ")
	}
	if state, detail, ok := judgeExplained(a, r); ok {
		return state, detail
	}
	switch {
	case a.Name == AssertNoSilentDrops:
		if r.SilentDrops == 0 {
			return StatePass, fmt.Sprintf("all %s resolved within their deadlines", format.Plural(r.Requests, "request"))
		}
		return StateFail, fmt.Sprintf("%s (%d stalled, %d deadline_exceeded)%s",
			format.Plural(r.SilentDrops, "silent drop"), r.Outcomes[ledger.OutcomeStalled], r.Outcomes[ledger.OutcomeDeadlineExceeded], b.dropSummary(r))
	case a.Name == AssertValidResponses:
		if n := r.Outcomes[ledger.OutcomeInvalid] + r.Outcomes[ledger.OutcomeTruncated]; n == 0 {
			return StatePass, fmt.Sprintf("no invalid or truncated responses among %d (explicit errors are valid)", r.Requests)
		}
		return StateFail, fmt.Sprintf("%d invalid, %d truncated%s", r.Outcomes[ledger.OutcomeInvalid], r.Outcomes[ledger.OutcomeTruncated],
			b.idList(ledger.OutcomeInvalid, ledger.OutcomeTruncated))
	case a.Name == AssertNoLeaks:
		switch {
		case b.leak == nil && b.interrupt != "":
			return StateNotEvaluated, "the run was interrupted before the leak check"
		case b.leak == nil:
			return StateNotEvaluated, "no leak check in the ledger (the run ended before the drain, or the harness had no metrics endpoint)"
		case b.leak.State == StateNotEvaluated:
			return StateNotEvaluated, b.leak.Detail
		case b.leak.Passed:
			return StatePass, format.FirstNonEmpty(b.leak.Detail, "gauges returned to their idle values after drain")
		}
		return StateFail, format.FirstNonEmpty(b.leak.Detail, "gauges did not return to idle after drain") + formatMetrics(b.leak.Metrics)
	case a.Name == AssertRecovery:
		return b.recoveryVerdict(r.Faults)
	case a.Consistent():
		return b.consistency(a.Prefix)
	case a.PDPath():
		return b.pdPathVerdict(a.Value, r)
	case a.Name == AssertTruthfulHealth:
		return b.truthfulHealthVerdict(r)
	case a.Latency():
		p := map[string]Percentiles{"ttft": r.TTFT, "itl": r.ITL, "e2e": r.E2E}[a.Arg]
		if p.Count == 0 {
			return StateNotEvaluated, fmt.Sprintf("no %s samples", a.Arg)
		}
		got := map[string]float64{"p50": p.P50, "p90": p.P90, "p95": p.P95, "p99": p.P99, "max": p.Max, "mean": p.Mean}[a.Func]
		return newState(a.Compare(got)), fmt.Sprintf("%s(%s) = %s over %s", a.Func, a.Arg, format.Seconds(got), format.Plural(p.Count, "sample"))
	case a.Func == "rate" || a.Func == "count":
		n := r.SilentDrops
		if a.Arg != "silent_drops" {
			n = r.Outcomes[ledger.Outcome(a.Arg)]
		}
		if a.Func == "count" {
			return newState(a.Compare(float64(n))), fmt.Sprintf("count(%s) = %d", a.Arg, n)
		}
		if r.Requests == 0 {
			return StateNotEvaluated, "no requests"
		}
		rate := float64(n) / float64(r.Requests)
		return newState(a.Compare(rate)), fmt.Sprintf("rate(%s) = %.4g (%d of %d)", a.Arg, rate, n, r.Requests)
	}
	return StateNotEvaluated, "unknown assertion"
}
