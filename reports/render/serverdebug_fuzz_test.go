package render

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"pdsoak/reports"
)

// FuzzServerDebug: what a server's /debug/requests answered (any bytes) is read by
// HeldAt, modelIDs and prettyJSON and summarised by serverSaid without panicking; a summary of valid UTF-8 is
// valid UTF-8 (a cut never splits a character) and keeps to its limit.
func FuzzServerDebug(f *testing.F) {
	f.Add([]byte(`{"where":"decode-0: prealloc","sources":[{"process":"decode-0","entries":[{"id":"a","stage":"prealloc"}]}]}`), 10)
	f.Add([]byte(`{"where":"ééééééééé"}`), 4)
	f.Add([]byte(`{"id":"a","stage":"transfer","note":"日本語のテキスト"}`), 20)
	f.Add([]byte(`nope`), 300)
	f.Fuzz(func(t *testing.T, raw []byte, limit int) {
		limit = 1 + (limit&0xffff)%400
		_ = reports.HeldAt(raw)
		_ = modelIDs(raw)
		_ = prettyJSON(raw)
		s := serverSaid(json.RawMessage(raw), limit)
		body := strings.TrimSuffix(s, "…")
		require.LessOrEqual(t, len(body), limit, "%q", s)
		if utf8.Valid(raw) {
			require.True(t, utf8.ValidString(s), "%q cut to %d: %q", raw, limit, s)
		}
	})
}

// TestPrettyJSONKeepsTheServersNumbers: report.html shows a drop's server_debug as
// results.json holds it, indented: a large integer (a byte or token counter) keeps
// its digits and the keys their order.
func TestPrettyJSONKeepsTheServersNumbers(t *testing.T) {
	raw := json.RawMessage(`{"z":1,"bytes":12345678901234567890,"a":{"id":"r1"}}`)
	got := prettyJSON(raw)
	require.Contains(t, got, "12345678901234567890")
	require.Less(t, strings.Index(got, `"z"`), strings.Index(got, `"bytes"`), got)
	var v any
	require.NoError(t, json.Unmarshal([]byte(got), &v), got)
}
