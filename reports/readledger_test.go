package reports

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// readBoth reads data with ledger.Read and readLedger.
func readBoth(data []byte) (want, got []ledger.Event, wst, gst ledger.ReadStats, werr, gerr error) {
	wst, werr = ledger.Read(bytes.NewReader(data), func(e ledger.Event) error { want = append(want, e); return nil })
	gst, gerr = readLedger(bytes.NewReader(data), func(e ledger.Event) error { got = append(got, e); return nil })
	return
}

func TestReadLedgerSaysWhatLedgerReadSays(t *testing.T) {
	fixture, err := os.ReadFile("testdata/events.jsonl")
	require.NoError(t, err)
	big := benchLedger(3000) // several batches
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

func TestReadLedgerStopsOnCallbackError(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	st, err := readLedger(bytes.NewReader(benchLedger(3000)), func(ledger.Event) error {
		if n++; n == 5000 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 5000, st.Lines)
}

// FuzzReadLedger: on any input, readLedger delivers the same events, stats and error as
// ledger.Read.
func FuzzReadLedger(f *testing.F) {
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
