package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// The embedded reference server's flags are checked by its own flag code at validate
// time: a bad one is exit 2 naming the field, before anything starts.
func TestValidateChecksReferenceFlags(t *testing.T) {
	for _, tc := range []struct {
		name, ref, want string
	}{
		{"unknown decode flag", "{prefill: 1, decode: 1, decode_args: [--max-totl-tokens=4096]}", "reference.decode_args: the reference server refuses these flags: unknown flag: --max-totl-tokens"},
		{"bad router value", "{prefill: 1, decode: 1, router_args: [--max-retries=-1]}", "reference.router_args: the reference server refuses these flags: --max-retries must be >= 0"},
		{"bad common flag, colocated", "{prefill: 0, decode: 0, args: [--log-format=xml]}", `reference.args: the reference server refuses these flags: --log-format "xml" is unknown`},
		{"a worker bug under strict semantics", "{prefill: 1, decode: 1, decode_args: [--sglang-bug=decode-oom-requeue]}", "reference.decode_args:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s.yaml")
			require.NoError(t, os.WriteFile(p, []byte("name: x\nduration: 10s\nreference: "+tc.ref+"\nworkloads:\n  - {name: a, type: agents}\n"), 0o644))
			code, _, stderr := execute(t, []string{"validate", p})
			assert.Equal(t, ExitUsage, code, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}
	p := filepath.Join(t.TempDir(), "ok.yaml")
	require.NoError(t, os.WriteFile(p, []byte("name: x\nduration: 10s\nreference: {prefill: 1, decode: 1, decode_args: [--max-total-tokens=4096]}\nworkloads:\n  - {name: a, type: agents}\n"), 0o644))
	code, _, stderr := execute(t, []string{"validate", p})
	assert.Equal(t, ExitPass, code, stderr)
}

// The console says when the target went down and came back, as it happens.
func TestStatusSaysTargetDown(t *testing.T) {
	var buf bytes.Buffer
	s := newStatus(&buf, false, time.Hour)
	clock := t0
	s.now = func() time.Time { return clock }
	s.observe(ledger.Event{Type: ledger.EventRunStart})
	clock = t0.Add(6100 * time.Millisecond)
	s.observe(ledger.Event{Type: ledger.EventTargetDown, Source: "target", URL: "http://127.0.0.1:9/health"})
	clock = t0.Add(9 * time.Second)
	s.observe(ledger.Event{Type: ledger.EventTargetUp, Source: "target"})
	assert.Equal(t, "harness: note: target went down at 6.1 s (no answer from http://127.0.0.1:9/health)\nharness: note: target is back at 9.0 s\n", buf.String())
}
