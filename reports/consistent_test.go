package reports

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

func TestParseConsistentOutputs(t *testing.T) {
	tests := []struct {
		in, name string
		prefix   int
		wantErr  bool
	}{
		{in: "consistent_outputs", name: "consistent_outputs"},
		{in: "consistent_outputs(16)", name: "consistent_outputs(16)", prefix: 16},
		{in: " consistent_outputs( 8 ) ", name: "consistent_outputs(8)", prefix: 8},
		{in: "consistent_outputs(-1)", wantErr: true},
		{in: "consistent_outputs(x)", wantErr: true},
		{in: "consistent_outputs(3", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAssertion(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, a.Consistent())
			assert.Equal(t, tc.name, a.Name)
			assert.Equal(t, tc.prefix, a.Prefix)
		})
	}
}

// probeDone is an ok answer to probe with text.
func probeDone(id, probe, text string, outcome ledger.Outcome) ledger.Event {
	return ledger.Event{Time: time.Unix(100, 0), Type: ledger.EventDone, RequestID: id, Workload: "probe",
		Outcome: outcome, Probe: probe, Text: text}
}

func TestConsistentOutputs(t *testing.T) {
	tests := []struct {
		name      string
		assertion string
		events    []ledger.Event
		want      State
	}{
		{"every answer agrees", "consistent_outputs", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "the cat", ledger.OutcomeOK),
			probeDone("p1-r0", "probe/p1", "a dog", ledger.OutcomeOK),
			probeDone("p0-r1", "probe/p0", "the cat", ledger.OutcomeOK),
			probeDone("p1-r1", "probe/p1", "a dog", ledger.OutcomeOK),
		}, StatePass},
		{"a wrong 200 fails", "consistent_outputs", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "the cat", ledger.OutcomeOK),
			probeDone("p0-r1", "probe/p0", "rerere", ledger.OutcomeOK),
		}, StateFail},
		{"explicit errors are not compared", "consistent_outputs", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "the cat", ledger.OutcomeOK),
			probeDone("p0-r1", "probe/p0", "", ledger.OutcomeHTTPError),
		}, StatePass},
		{"a late difference within the prefix tolerance", "consistent_outputs(4)", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "the cat sat", ledger.OutcomeOK),
			probeDone("p0-r1", "probe/p0", "the dog ran", ledger.OutcomeOK),
		}, StatePass},
		{"an early difference beyond it", "consistent_outputs(4)", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "the cat sat", ledger.OutcomeOK),
			probeDone("p0-r1", "probe/p0", "tho cat sat", ledger.OutcomeOK),
		}, StateFail},
		{"no probe answered", "consistent_outputs", []ledger.Event{
			probeDone("p0-r0", "probe/p0", "", ledger.OutcomeRejected),
		}, StateNotEvaluated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder(Config{Assertions: []string{tc.assertion}})
			for _, e := range tc.events {
				b.Add(e)
			}
			r := b.Results()
			require.Len(t, r.Assertions, 1)
			assert.Equal(t, tc.want, r.Assertions[0].State, r.Assertions[0].Detail)
		})
	}
}

// FuzzConsistentOutputsParse: a consistent_outputs assertion parses back from its name
// with the same prefix.
func FuzzConsistentOutputsParse(f *testing.F) {
	for _, s := range []string{"consistent_outputs", "consistent_outputs(3)", "consistent_outputs(", "consistent_outputs(-2)", "consistent_outputs(1)x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssertion(s)
		if err != nil || !a.Consistent() {
			return
		}
		b, err := ParseAssertion(a.Name)
		require.NoError(t, err)
		require.Equal(t, a.Prefix, b.Prefix)
		require.Equal(t, a.Name, b.Name)
	})
}
