package router

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

func TestPickPair(t *testing.T) {
	up := func(n int64) Candidate { return Candidate{Healthy: true, HasBootstrap: true, Outstanding: n} }
	last := func(n int) int { return n - 1 }
	for _, tc := range []struct {
		name    string
		p, d    []Candidate
		bugs    scheduler.BugSet
		want    Pair
		wantErr bool
	}{
		{"fewest outstanding", []Candidate{up(3), up(1)}, []Candidate{up(0), up(2)}, nil, Pair{1, 0}, false},
		{"ties broken by the draw", []Candidate{up(1), up(1)}, []Candidate{up(0), up(0), up(5)}, nil, Pair{1, 1}, false},
		{"excluded and unhealthy skipped", []Candidate{{Healthy: true, HasBootstrap: true, Excluded: true}, up(9)},
			[]Candidate{{Healthy: false, HasBootstrap: true}, up(4)}, nil, Pair{1, 1}, false},
		{"a prefill needs its bootstrap address", []Candidate{{Healthy: true}}, []Candidate{up(0)}, nil, Pair{-1, -1}, true},
		{"no healthy decode", []Candidate{up(0)}, []Candidate{{HasBootstrap: true}}, nil, Pair{-1, -1}, true},
		{"decode-only under sglang#31206", []Candidate{{HasBootstrap: true}}, []Candidate{up(0)},
			scheduler.BugSet{scheduler.BugDecodeOnlyWhenPrefillDown}, Pair{0, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PickPair(tc.p, tc.d, tc.bugs, last, func() string { return "why" })
			if tc.wantErr {
				require.ErrorIs(t, err, gen.ErrUnavailable)
				assert.Contains(t, err.Error(), "(why)")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, HasPair(tc.p, tc.d, tc.bugs), true)
		})
	}
}

func TestAfterAttempt(t *testing.T) {
	transfer := fmt.Errorf("x: %w", gen.ErrTransfer)
	invalid := fmt.Errorf("x: %w", gen.ErrInvalid)
	timeout := fmt.Errorf("x: %w", gen.ErrTimeout)
	for _, tc := range []struct {
		name      string
		a         Attempt
		retry     bool
		sentinel  error
		stageName string
	}{
		{"transfer error retried", Attempt{Err: transfer, MaxRetries: 2}, true, nil, ""},
		{"transport retried", Attempt{Err: invalid, Transport: true, MaxRetries: 2}, true, nil, ""},
		{"not retryable", Attempt{Err: invalid, MaxRetries: 2}, false, gen.ErrInvalid, ""},
		{"tokens sent: never retried", Attempt{Err: transfer, Sent: true, MaxRetries: 2}, false, gen.ErrTransfer, ""},
		{"retries spent", Attempt{Err: transfer, Number: 2, MaxRetries: 2}, false, gen.ErrTransfer, ""},
		{"deadline: a total timeout", Attempt{Err: transfer, DeadlinePassed: true, MaxRetries: 2}, false, gen.ErrTimeout, "total"},
		{"deadline after the leg's own timeout", Attempt{Err: timeout, DeadlinePassed: true, MaxRetries: 2}, false, gen.ErrAborted, ""},
		{"client gone", Attempt{Err: transfer, ClientGone: true, MaxRetries: 2}, false, gen.ErrAborted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			final, retry := AfterAttempt(tc.a)
			assert.Equal(t, tc.retry, retry)
			if tc.retry {
				assert.NoError(t, final)
				return
			}
			assert.ErrorIs(t, final, tc.sentinel)
			var se *gen.StageError
			if tc.stageName != "" {
				require.True(t, errors.As(final, &se))
				assert.Equal(t, tc.stageName, se.Stage)
			}
		})
	}
}

func TestPrefillEnded(t *testing.T) {
	bug := scheduler.BugSet{scheduler.BugPrefillFailNoDecodeAbort}
	e := errors.New("boom")
	assert.Equal(t, PrefillIgnore, PrefillEnded(nil, false, nil))
	assert.Equal(t, PrefillIgnore, PrefillEnded(e, true, nil))
	assert.Equal(t, PrefillFailAttempt, PrefillEnded(e, false, nil))
	assert.Equal(t, PrefillLeaveDecode, PrefillEnded(e, false, bug))
	assert.True(t, DecodeOnly(scheduler.BugSet{scheduler.BugDecodeOnlyWhenPrefillDown}, false))
	assert.False(t, DecodeOnly(scheduler.BugSet{scheduler.BugDecodeOnlyWhenPrefillDown}, true))
	assert.False(t, DecodeOnly(nil, false))
}

func TestRoom(t *testing.T) {
	_, ok := Room(5, 5)
	assert.False(t, ok, "a zero room asks for another draw")
	r, ok := Room(6, 0)
	assert.True(t, ok)
	assert.Equal(t, uint64(3), r)
}
