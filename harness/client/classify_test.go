package client

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

// TestClassify is the decision table of Classify, one row per rule, in precedence order.
func TestClassify(t *testing.T) {
	ok := Facts{Headers: true, Status: 200, End: EndClean, Done: true, Finished: true}
	with := func(mod func(*Facts)) Facts { f := ok; mod(&f); return f }
	tests := []struct {
		name string
		f    Facts
		want Verdict
	}{
		{"complete", ok, Verdict{Outcome: ledger.OutcomeOK}},
		{"stall deadline wins over a complete reply", with(func(f *Facts) { f.Deadline, f.DeadlinePhase = "stall", ledger.PhaseMidStream }),
			Verdict{Outcome: ledger.OutcomeStalled, Phase: ledger.PhaseMidStream, Deadline: "stall"}},
		{"total deadline", Facts{Deadline: "total", DeadlinePhase: ledger.PhaseBeforeHeaders},
			Verdict{Outcome: ledger.OutcomeDeadlineExceeded, Phase: ledger.PhaseBeforeHeaders, Deadline: "total"}},
		{"client abort", Facts{ClientAbort: true, Phase: ledger.PhaseMidStream, Headers: true, Status: 200, End: EndAbrupt},
			Verdict{Outcome: ledger.OutcomeCancelled, Phase: ledger.PhaseMidStream}},
		{"harness cancel", Facts{Cancelled: true, Phase: ledger.PhaseConnect}, Verdict{Outcome: ledger.OutcomeCancelled, Phase: ledger.PhaseConnect}},
		{"no head", Facts{End: EndAbrupt}, Verdict{Outcome: ledger.OutcomeTransportError}},
		{"429", Facts{Headers: true, Status: 429}, Verdict{Outcome: ledger.OutcomeRejected}},
		{"503", Facts{Headers: true, Status: 503}, Verdict{Outcome: ledger.OutcomeRejected}},
		{"500", Facts{Headers: true, Status: 500}, Verdict{Outcome: ledger.OutcomeHTTPError}},
		{"error event beats an abrupt end", Facts{Headers: true, Status: 200, StreamError: true, End: EndAbrupt}, Verdict{Outcome: ledger.OutcomeStreamError}},
		{"protocol violation", Facts{Headers: true, Status: 200, Invalid: true}, Verdict{Outcome: ledger.OutcomeInvalid}},
		{"[DONE] without finish_reason", with(func(f *Facts) { f.Finished = false }), Verdict{Outcome: ledger.OutcomeTruncated}},
		{"usage below the pieces", with(func(f *Facts) { f.UsageSent, f.CompletionTokens, f.Pieces = true, 1, 2 }), Verdict{Outcome: ledger.OutcomeInvalid}},
		{"usage covering the pieces", with(func(f *Facts) { f.UsageSent, f.CompletionTokens, f.Pieces = true, 2, 2 }), Verdict{Outcome: ledger.OutcomeOK}},
		{"abrupt end, no [DONE]", Facts{Headers: true, Status: 200, End: EndAbrupt, Finished: true}, Verdict{Outcome: ledger.OutcomeConnectionLost}},
		{"clean end, no [DONE]", Facts{Headers: true, Status: 200, End: EndClean, Finished: true}, Verdict{Outcome: ledger.OutcomeTruncated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, Classify(tt.f)) })
	}
}
