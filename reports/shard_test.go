package reports

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

// TestMergedLedgerJudging: reports judges a merged ledger from its run_start shard
// metadata, and one shard's failed check is not hidden by another shard's pass.
func TestMergedLedgerJudging(t *testing.T) {
	start := func(parts ...int) ledger.Event {
		return ev(ledger.EventRunStart, 0, func(e *ledger.Event) {
			e.Scenario = "s"
			e.Shard = &ledger.Shard{Count: 3}
			for _, p := range parts {
				e.Shard.Parts = append(e.Shard.Parts, ledger.ShardPart{Index: p})
			}
		})
	}
	check := func(typ ledger.EventType, sec float64, ok bool) ledger.Event {
		return ev(typ, sec, func(e *ledger.Event) { e.Passed = ledger.Bool(ok); e.Detail = "shard says " + string(typ) })
	}
	tests := []struct {
		name    string
		evs     []ledger.Event
		invalid string // "": valid
	}{
		{"all shards", []ledger.Event{start(1, 2, 3), done("a~s1", 1, ledger.OutcomeOK), ev(ledger.EventRunEnd, 2, nil)}, ""},
		{"a shard missing", []ledger.Event{start(1, 3), done("a~s1", 1, ledger.OutcomeOK), ev(ledger.EventRunEnd, 2, nil)}, "merged ledger holds 2 of 3 shards"},
		{"one shard's self-check failed", []ledger.Event{start(1, 2, 3), done("a~s1", 1, ledger.OutcomeOK),
			check(ledger.EventSelfCheck, 1.5, false), check(ledger.EventSelfCheck, 1.6, true), ev(ledger.EventRunEnd, 2, nil)}, "self-check failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(tt.evs, Config{Assertions: []string{AssertNoSilentDrops}})
			if tt.invalid == "" {
				assert.NotEqual(t, VerdictInvalid, res.Verdict, res.InvalidReasons)
				assert.NotNil(t, res.Shard)
				return
			}
			assert.Equal(t, VerdictInvalid, res.Verdict)
			assert.Contains(t, strings.Join(res.InvalidReasons, "\n"), tt.invalid)
		})
	}
}

func TestMergedLeakFailureSticks(t *testing.T) {
	leak := func(sec float64, ok bool) ledger.Event {
		return ev(ledger.EventLeakCheck, sec, func(e *ledger.Event) { e.Passed = ledger.Bool(ok) })
	}
	res := Compute([]ledger.Event{ev(ledger.EventRunStart, 0, nil), done("a", 1, ledger.OutcomeOK), leak(1.5, false), leak(1.6, true), ev(ledger.EventRunEnd, 2, nil)},
		Config{Assertions: []string{AssertNoLeaks}})
	assert.Equal(t, VerdictFail, res.Verdict, "a later shard's clean leak check does not hide an earlier leak")
}
