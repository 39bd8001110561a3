package reports

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// TestMergedLeakJudging: a merged run's no_leaks is the leak check of the shard whose
// check started last, and only if no other shard still had a request in flight then.
func TestMergedLeakJudging(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec float64) *time.Time { return new(base.Add(time.Duration(sec * float64(time.Second)))) }
	start := ev(ledger.EventRunStart, 0, func(e *ledger.Event) {
		e.Scenario = "s"
		e.Shard = &ledger.Shard{Count: 3, Parts: []ledger.ShardPart{{Index: 1}, {Index: 2}, {Index: 3}}}
	})
	drain := func(part int, sec float64) ledger.Event {
		return ev(ledger.EventDrain, sec, func(e *ledger.Event) { e.Part = part; e.Passed = ledger.Bool(true) })
	}
	// leak: shard part's check, started at began, written at sec.
	leak := func(part int, began, sec float64, passed *bool) ledger.Event {
		return ev(ledger.EventLeakCheck, sec, func(e *ledger.Event) {
			e.Part, e.Started, e.Passed = part, at(began), passed
			e.Detail = fmt.Sprintf("shard %d gauges", part)
		})
	}
	// Each shard's last request ends at 5+part, it drains then and checks right away.
	shards := func(leaks ...ledger.Event) []ledger.Event {
		evs := []ledger.Event{start}
		for p := 1; p <= 3; p++ {
			evs = append(evs, done(fmt.Sprintf("a-s%03d~s%d", p, p), float64(5+p), ledger.OutcomeOK), drain(p, float64(5+p)+0.01))
		}
		evs = append(evs, leaks...)
		return append(evs, ev(ledger.EventRunEnd, 20, nil))
	}
	pass, fail := ledger.Bool(true), ledger.Bool(false)
	tests := []struct {
		name    string
		evs     []ledger.Event
		state   State
		verdict Verdict
		detail  string
	}{
		{"the last shard's check passes; earlier ones saw others' traffic", shards(
			leak(1, 6.02, 7, fail), leak(2, 7.02, 8, fail), leak(3, 8.02, 9, pass)),
			StatePass, VerdictPass, "shard 3's leak check, the last to start"},
		{"the last shard's check fails", shards(
			leak(1, 6.02, 7, pass), leak(2, 7.02, 8, pass), leak(3, 8.02, 9, fail)),
			StateFail, VerdictFail, "shard 3 gauges"},
		{"the last to start is not the last in shard order", shards(
			leak(1, 9.5, 10, pass), leak(2, 7.02, 8, fail), leak(3, 8.02, 9, fail)),
			StatePass, VerdictPass, "shard 1's leak check, the last to start"},
		{"the last check overlapped another shard's requests", shards(
			leak(1, 6.02, 7, pass), leak(2, 7.5, 8, pass)),
			StateNotEvaluated, VerdictInvalid, "shard 2's leak check ran while shard 3 still had requests in flight"},
		{"the last check could not run", shards(
			leak(1, 6.02, 7, pass), leak(2, 7.02, 8, pass), leak(3, 8.02, 9, nil)),
			StateNotEvaluated, VerdictInvalid, "shard 3's leak check"},
		{"no start recorded: the shard's drain is taken as its start", shards(
			leak(1, 6.02, 7, pass), leak(2, 7.02, 8, pass),
			ev(ledger.EventLeakCheck, 9, func(e *ledger.Event) { e.Part, e.Passed = 3, pass })),
			StatePass, VerdictPass, "shard 3's leak check, the last to start"},
		{"a check without its shard", shards(
			leak(1, 6.02, 7, pass), leak(0, 9, 9.5, pass)),
			StateNotEvaluated, VerdictInvalid, "does not say which shard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Compute(tt.evs, Config{Assertions: []string{AssertNoLeaks}})
			require.Len(t, res.Assertions, 1)
			assert.Equal(t, tt.state, res.Assertions[0].State, res.Assertions[0].Detail)
			assert.Contains(t, res.Assertions[0].Detail, tt.detail)
			assert.Equal(t, tt.verdict, res.Verdict, res.InvalidReasons)
			require.NotNil(t, res.Leak)
			assert.Equal(t, tt.state, res.Leak.State)
			// Every shard's own check stays in the report.
			var own int
			for _, n := range res.Notes {
				if strings.Contains(n, "'s own leak check") {
					own++
				}
			}
			assert.Equal(t, countType(tt.evs, ledger.EventLeakCheck), own)
		})
	}
}

func countType(evs []ledger.Event, typ ledger.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
