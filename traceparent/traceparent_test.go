package traceparent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeriveIsDeterministicAndDistinct(t *testing.T) {
	a := Derive(42, "agents-s1-t1")
	assert.Equal(t, a, Derive(42, "agents-s1-t1"), "same seed and id: same traceparent")
	assert.NotEqual(t, a.TraceID, Derive(43, "agents-s1-t1").TraceID, "another seed")
	assert.NotEqual(t, a.TraceID, Derive(42, "agents-s1-t2").TraceID, "another request")
	assert.Equal(t, FlagSampled, a.Flags)
	assert.Len(t, a.TraceIDHex(), 32)
	assert.Len(t, a.SpanIDHex(), 16)
	s := a.String()
	assert.Equal(t, "00-"+a.TraceIDHex()+"-"+a.SpanIDHex()+"-01", s)
	back, err := Parse(s)
	require.NoError(t, err)
	assert.Equal(t, a, back)
}

// TestDeriveGolden pins the derivation: a change would give a replay different ids
// from the run it replays.
func TestDeriveGolden(t *testing.T) {
	assert.Equal(t, "00-8ecb1f181b7521d236d3ecd731207536-bb08f67fd5464499-01", Derive(1, "r1").String())
}

func TestParse(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, in string
		wantErr  string // substring; empty: valid
	}{
		{"spec example", good, ""},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""},
		{"surrounding spaces", " \t" + good + " ", ""},
		{"later version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", ""},
		{"later version exactly 55", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"empty", "", "0 characters"},
		{"short", good[:54], "54 characters"},
		{"version 00 too long", good + "-x", "version 00 has 57"},
		{"later version glued", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", "follow a '-'"},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version ff"},
		{"upper case", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "trace id"},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "separated"},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "all-zero trace id"},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "all-zero parent id"},
		{"bad flags", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "flags"},
		{"bad version", "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.in)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", tp.TraceIDHex())
				assert.Equal(t, "00f067aa0ba902b7", tp.SpanIDHex())
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrInvalid))
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.True(t, tp.IsZero(), "an invalid header gives no ids")
		})
	}
}

func TestContext(t *testing.T) {
	_, ok := FromContext(context.Background())
	assert.False(t, ok)
	tp := Derive(7, "x")
	got, ok := FromContext(NewContext(context.Background(), tp))
	assert.True(t, ok)
	assert.Equal(t, tp, got)
	_, ok = FromContext(NewContext(context.Background(), TraceParent{}))
	assert.False(t, ok, "a zero traceparent is none")
}

// FuzzParse: Parse never panics; what it accepts has non-zero ids and, for version 00,
// prints back as the input (modulo surrounding spaces).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"", "00", " 00-00000000000000000000000000000000-0000000000000000-00",
		Derive(1, "r1").String(),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		// TraceIDOf is Parse's trace id as TraceIDHex writes it.
		if id, ok := TraceIDOf(s); ok != (err == nil) || (ok && id != tp.TraceIDHex()) {
			t.Fatalf("TraceIDOf(%q) = %q, %v; Parse: %v, %v", s, id, ok, tp.TraceIDHex(), err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if tp.TraceID == ([16]byte{}) || tp.SpanID == ([8]byte{}) {
			t.Fatalf("accepted zero ids: %q", s)
		}
		if trimmed := strings.Trim(s, " \t"); strings.HasPrefix(trimmed, "00-") && tp.String() != trimmed {
			t.Fatalf("round trip: %q -> %q", trimmed, tp.String())
		}
	})
}

func TestDeriveAndTraceIDOfAllocate(t *testing.T) {
	v := Derive(7, "ol-00000001").String()
	require.Zero(t, testing.AllocsPerRun(100, func() { Derive(7, "ol-00000001") }))
	require.Zero(t, testing.AllocsPerRun(100, func() { TraceIDOf(v) }))
	// Short and past the stack buffer: the hash of the tag, the seed and the id.
	for _, id := range []string{"r1", strings.Repeat("x", 500)} {
		h := sha256.New()
		h.Write([]byte("pdsoak traceparent v1\x00"))
		h.Write(binary.LittleEndian.AppendUint64(nil, 3))
		h.Write([]byte(id))
		sum := h.Sum(nil)
		tp := Derive(3, id)
		require.Equal(t, sum[:16], tp.TraceID[:])
		require.Equal(t, sum[16:24], tp.SpanID[:])
	}
}
