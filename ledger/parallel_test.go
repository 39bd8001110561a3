package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readBoth reads data with Read and ReadParallel.
func readBoth(data []byte) (want, got []Event, wst, gst ReadStats, werr, gerr error) {
	wst, werr = Read(bytes.NewReader(data), func(e Event) error { want = append(want, e); return nil })
	gst, gerr = ReadParallel(bytes.NewReader(data), func(e Event) error { got = append(got, e); return nil })
	return
}

func TestReadParallelSaysWhatReadSays(t *testing.T) {
	fixture, err := os.ReadFile("../reports/testdata/events.jsonl") // the reports fixture: a real run's ledger
	require.NoError(t, err)
	big := syntheticLedger(3000) // several batches
	good := `{"t":"2026-01-01T00:00:00Z","type":"note","message":"a"}`
	for _, tc := range []struct {
		name    string
		data    string
		lines   int
		torn    bool
		errLine string
	}{
		{"fixture", string(fixture), strings.Count(string(fixture), "\n"), false, ""},
		{"many batches", string(big), 4*3000 + 1, false, ""},
		{"torn last line", string(big) + `{"t":"2026-01-01T00:00`, 4*3000 + 1, true, ""},
		{"last line without newline but whole", good + "\n" + good, 2, false, ""},
		{"blank lines and spaces", "\n  \n" + good + "\n\n \t" + good + "  \n", 2, false, ""},
		{"bad line in the middle", string(big) + "{nope\n" + good + "\n", 4*3000 + 1, false, "line 12002"},
		{"empty", "", 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got, wst, gst, werr, gerr := readBoth([]byte(tc.data))
			assert.Equal(t, wst, gst)
			assert.Equal(t, want, got)
			assert.Equal(t, tc.lines, gst.Lines)
			assert.Equal(t, tc.torn, gst.Torn)
			if tc.errLine == "" {
				require.NoError(t, gerr)
				require.NoError(t, werr)
				return
			}
			require.Error(t, gerr)
			assert.Equal(t, werr.Error(), gerr.Error())
			assert.Contains(t, gerr.Error(), tc.errLine)
		})
	}
}

func TestReadParallelStopsOnCallbackError(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	st, err := ReadParallel(bytes.NewReader(syntheticLedger(3000)), func(Event) error {
		if n++; n == 5000 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 5000, st.Lines)
}

// FuzzReadParallel: on any input, ReadParallel delivers the same events, stats and error as
// Read.
func FuzzReadParallel(f *testing.F) {
	f.Add([]byte(`{"t":"2026-01-01T00:00:00Z","type":"note","message":"a"}` + "\n\n" + `{"type":"done","itl":[0.1]}`))
	f.Add([]byte("{\n}\n{bad"))
	f.Add([]byte(" \n\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, got, wst, gst, werr, gerr := readBoth(data)
		require.Equal(t, wst, gst)
		require.Equal(t, want, got)
		require.Equal(t, werr == nil, gerr == nil)
		if werr != nil {
			require.Equal(t, werr.Error(), gerr.Error())
		}
	})
}

// syntheticLedger is a ledger of n requests (scheduled, sent, first_token, done).
func syntheticLedger(n int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_ = enc.Encode(Event{Time: t, Type: EventRunStart, Scenario: "synthetic", Seed: 1})
	outs := []Outcome{OutcomeOK, OutcomeOK, OutcomeRejected, OutcomeStalled}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("r%06d", i)
		s := t.Add(time.Duration(i) * time.Millisecond)
		_ = enc.Encode(Event{Time: s, Type: EventScheduled, RequestID: id, Workload: "w"})
		_ = enc.Encode(Event{Time: s, Type: EventSent, RequestID: id, Scheduled: &s, Lag: 0.0001})
		_ = enc.Encode(Event{Time: s.Add(50 * time.Millisecond), Type: EventFirstToken, RequestID: id, TTFT: 0.05})
		_ = enc.Encode(Event{Time: s.Add(200 * time.Millisecond), Type: EventDone, RequestID: id, Workload: "w", Scheduled: &s,
			Outcome: outs[i%len(outs)], TTFT: 0.05, E2E: 0.2, ITL: []float64{0.01, 0.012}})
	}
	return buf.Bytes()
}
