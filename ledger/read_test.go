package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a small complete ledger: run_start, three requests, run_end.
func fixture(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	require.NoError(t, enc.Encode(Event{Time: t0, Type: EventRunStart, Scenario: "fixture", Seed: 1,
		Provenance: &Provenance{HarnessVersion: "v0.3.0", Host: "ci"}}))
	for i, o := range []Outcome{OutcomeOK, OutcomeStalled, OutcomeRejected} {
		id := fmt.Sprintf("r%d", i)
		at := t0.Add(time.Duration(i) * time.Second)
		require.NoError(t, enc.Encode(Event{Time: at, Type: EventScheduled, RequestID: id}))
		require.NoError(t, enc.Encode(Event{Time: at.Add(time.Second), Type: EventDone, RequestID: id, Outcome: o, Scheduled: &at}))
	}
	require.NoError(t, enc.Encode(Event{Time: t0.Add(9 * time.Second), Type: EventRunEnd, Interrupted: "interrupt signal received"}))
	return buf.Bytes()
}

func TestReadTornLastLine(t *testing.T) {
	data := fixture(t)
	full, _, err := ReadAll(bytes.NewReader(data))
	require.NoError(t, err)
	require.Len(t, full, 8)
	tests := []struct {
		name  string
		input []byte
		n     int
		torn  bool
		err   string
	}{
		{name: "complete", input: data, n: len(full)},
		{name: "torn mid-line", input: append(append([]byte{}, data...), `{"time":"2026-12-02T10:00:30Z","type":"do`...), n: len(full), torn: true},
		{name: "last line without newline but whole", input: bytes.TrimSuffix(data, []byte("\n")), n: len(full)},
		{name: "blank lines", input: append([]byte("\n\n"), data...), n: len(full)},
		{name: "bad middle line", input: append([]byte("{nope\n"), data...), err: "ledger line 1"},
		{name: "bad line after good ones", input: append(append([]byte{}, data...), "{nope\n{}\n"...), err: "ledger line 9"},
		{name: "empty", input: nil, n: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, st, err := ReadAll(bytes.NewReader(tt.input))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, evs, tt.n)
			assert.Equal(t, tt.n, st.Lines)
			assert.Equal(t, tt.torn, st.Torn)
		})
	}
}

func TestReadRoundTrip(t *testing.T) {
	evs, _, err := ReadAll(bytes.NewReader(fixture(t)))
	require.NoError(t, err)
	require.NotNil(t, evs[0].Provenance)
	assert.Equal(t, "v0.3.0", evs[0].Provenance.HarnessVersion)
	assert.Equal(t, OutcomeStalled, evs[4].Outcome)
	assert.Equal(t, "interrupt signal received", evs[len(evs)-1].Interrupted)
}

func TestReadStopsOnCallbackError(t *testing.T) {
	stop := fmt.Errorf("enough")
	n := 0
	st, err := Read(bytes.NewReader(fixture(t)), func(Event) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 2, n)
	assert.Equal(t, 2, st.Lines)
}

// FuzzRead: whatever the input, Read never panics, delivers exactly st.Lines events,
// and a torn line is only ever the last one.
func FuzzRead(f *testing.F) {
	f.Add(fixture(f))
	f.Add([]byte("{\"type\":\"done\"}\n{\"ty"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte("{}\n{nope\n{}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		n := 0
		st, err := Read(bytes.NewReader(in), func(Event) error { n++; return nil })
		require.Equal(t, n, st.Lines)
		if err != nil {
			require.False(t, st.Torn, "an error and a torn line at once")
			return
		}
		if st.Torn {
			// Everything before the torn tail decodes on its own.
			cut := bytes.LastIndexByte(in, '\n')
			evs, st2, err := ReadAll(bytes.NewReader(in[:cut+1]))
			require.NoError(t, err)
			require.Len(t, evs, n)
			require.False(t, st2.Torn)
		}
	})
}
