package traceparent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Header is the HTTP header's name (lower case, as the specification writes it).
const Header = "traceparent"

// FlagSampled is the trace-flags bit that says the caller recorded the trace.
const FlagSampled byte = 0x01

// ErrInvalid marks a header value that is not a valid traceparent.
var ErrInvalid = errors.New("traceparent: invalid")

// TraceParent is one parsed or derived traceparent (version 00).
type TraceParent struct {
	TraceID [16]byte
	// SpanID is the caller's span (the spec's parent-id): the harness's span of the
	// request, under which the server's spans sit.
	SpanID [8]byte
	Flags  byte
}

// Derive is the request's traceparent: trace id and span id are the first 24 bytes of
// SHA-256 over a domain tag, the seed and the request id, so the same scenario, seed and
// request id give the same ids on every run and in the simulator. Sampled is set.
func Derive(seed int64, requestID string) TraceParent {
	// One buffer on the stack (a request id longer than it moves it to the heap).
	var buf [128]byte
	b := append(buf[:0], "pdsoak traceparent v1\x00"...)
	b = binary.LittleEndian.AppendUint64(b, uint64(seed))
	sum := sha256.Sum256(append(b, requestID...))
	var tp TraceParent
	copy(tp.TraceID[:], sum[:16])
	copy(tp.SpanID[:], sum[16:24])
	// All-zero ids are invalid; SHA-256 will not produce them, but the header must
	// stay valid whatever the hash gives.
	if tp.TraceID == ([16]byte{}) {
		tp.TraceID[15] = 1
	}
	if tp.SpanID == ([8]byte{}) {
		tp.SpanID[7] = 1
	}
	tp.Flags = FlagSampled
	return tp
}

// TraceIDHex is the trace id as 32 lower-case hex digits (the ledger's trace_id).
func (t TraceParent) TraceIDHex() string { return hex.EncodeToString(t.TraceID[:]) }

// TraceIDOf is the trace id of header value s as TraceIDHex writes it, ok false where
// Parse refuses s; without an allocation: the digits are s's own (Parse checked that
// they are lower-case hex).
func TraceIDOf(s string) (id string, ok bool) {
	if _, err := Parse(s); err != nil {
		return "", false
	}
	return trimOWS(s)[3:35], true
}

// SpanIDHex is the span (parent) id as 16 lower-case hex digits.
func (t TraceParent) SpanIDHex() string { return hex.EncodeToString(t.SpanID[:]) }

// IsZero reports whether t is the zero value (no traceparent).
func (t TraceParent) IsZero() bool { return t == TraceParent{} }

// String is the header value: "00-<trace id>-<span id>-<flags>".
func (t TraceParent) String() string {
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, t.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, t.SpanID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{t.Flags})
	return string(b)
}

// Parse reads a traceparent header value by the specification's rules: lower-case hex,
// version ff invalid, version 00 exactly 55 characters, a later version at least 55
// with a '-' after the flags when longer (its extra fields are ignored), all-zero trace
// or span ids invalid. Leading and trailing spaces and tabs are allowed (HTTP OWS).
func Parse(s string) (TraceParent, error) {
	s = trimOWS(s)
	var tp TraceParent
	if len(s) < 55 {
		return tp, fmt.Errorf("%w: %d characters, want 55", ErrInvalid, len(s))
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tp, fmt.Errorf("%w: fields must be separated by '-' at 2, 35 and 52", ErrInvalid)
	}
	var ver [1]byte
	if err := decodeLower(ver[:], s[:2]); err != nil {
		return tp, fmt.Errorf("%w: version: %w", ErrInvalid, err)
	}
	switch {
	case ver[0] == 0xff:
		return tp, fmt.Errorf("%w: version ff is forbidden", ErrInvalid)
	case ver[0] == 0 && len(s) != 55:
		return tp, fmt.Errorf("%w: version 00 has %d characters, want 55", ErrInvalid, len(s))
	case len(s) > 55 && s[55] != '-':
		return tp, fmt.Errorf("%w: a later version's extra fields must follow a '-'", ErrInvalid)
	}
	if err := decodeLower(tp.TraceID[:], s[3:35]); err != nil {
		return TraceParent{}, fmt.Errorf("%w: trace id: %w", ErrInvalid, err)
	}
	if err := decodeLower(tp.SpanID[:], s[36:52]); err != nil {
		return TraceParent{}, fmt.Errorf("%w: parent id: %w", ErrInvalid, err)
	}
	var fl [1]byte
	if err := decodeLower(fl[:], s[53:55]); err != nil {
		return TraceParent{}, fmt.Errorf("%w: flags: %w", ErrInvalid, err)
	}
	tp.Flags = fl[0]
	if tp.TraceID == ([16]byte{}) {
		return TraceParent{}, fmt.Errorf("%w: all-zero trace id", ErrInvalid)
	}
	if tp.SpanID == ([8]byte{}) {
		return TraceParent{}, fmt.Errorf("%w: all-zero parent id", ErrInvalid)
	}
	return tp, nil
}

// decodeLower decodes hex into dst, refusing upper-case digits (the spec says lower).
func decodeLower(dst []byte, s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("character %q is not a lower-case hex digit", c)
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

type ctxKey struct{}

// NewContext returns ctx carrying tp (the router reads it when it calls the legs).
func NewContext(ctx context.Context, tp TraceParent) context.Context {
	return context.WithValue(ctx, ctxKey{}, tp)
}

// FromContext returns the traceparent ctx carries, if any.
func FromContext(ctx context.Context) (TraceParent, bool) {
	tp, ok := ctx.Value(ctxKey{}).(TraceParent)
	return tp, ok && !tp.IsZero()
}
