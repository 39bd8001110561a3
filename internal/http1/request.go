package http1

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// ErrInvalidHeader is a request header the writer refuses to put on the wire. The error
// names the header, never its value (values may be secrets).
var ErrInvalidHeader = errors.New("http1: invalid request header")

// Request is one request to write. Header holds the caller's extra headers: every one is
// sent, except the framing the writer owns (Host, Content-Length, Transfer-Encoding,
// Connection, Accept-Encoding) and the fields set below (Content-Type, Accept,
// X-Request-Id), which the struct's own values win over.
type Request struct {
	Method, Host string
	Prefix, Path string // the request target is Prefix+Path (no concatenation needed)
	UserAgent    string // default "pdsoak"; Header may override it
	ContentType  string // omitted when empty
	Accept       string // omitted when empty
	RequestID    string // X-Request-Id; omitted when empty
	// TraceParent is the W3C traceparent value (omitted when empty, or when Header or
	// Defaults carry one): a field, not a Header entry, so stamping every request with
	// its trace costs no map.
	TraceParent string
	Defaults    http.Header // sent unless Header has the same name
	Header      http.Header
	Body        []byte
}

// owned are the headers the writer sets itself.
func owned(ck string) bool {
	switch ck {
	case "Host", "Content-Length", "Content-Type", "Accept", "X-Request-Id", "Transfer-Encoding", "Connection",
		"Accept-Encoding", "Te", "Trailer", "Upgrade":
		return true
	}
	return false
}

// AppendRequest appends r as HTTP/1.1 bytes (head and body, so one write is one
// segment). It asks for Accept-Encoding: identity: with no Accept-Encoding at all RFC
// 9110 §12.5.3 lets a server pick any coding.
func AppendRequest(b []byte, r *Request) ([]byte, error) {
	b = append(b, r.Method...)
	b = append(b, ' ')
	b = append(b, r.Prefix...)
	b = append(b, r.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.Host...)
	_, ua1 := r.Header["User-Agent"]
	_, ua2 := r.Defaults["User-Agent"]
	if !ua1 && !ua2 {
		ua := r.UserAgent
		if ua == "" {
			ua = "pdsoak"
		}
		b = append(b, "\r\nUser-Agent: "...)
		b = append(b, ua...)
	}
	if r.ContentType != "" {
		b = append(b, "\r\nContent-Type: "...)
		b = append(b, r.ContentType...)
	}
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(r.Body)), 10)
	if r.Accept != "" {
		b = append(b, "\r\nAccept: "...)
		b = append(b, r.Accept...)
	}
	b = append(b, "\r\nAccept-Encoding: identity"...)
	if r.RequestID != "" {
		if !ValidHeaderValue(r.RequestID) {
			return b, fmt.Errorf("%w: X-Request-Id %q", ErrInvalidHeader, r.RequestID)
		}
		b = append(b, "\r\nX-Request-Id: "...)
		b = append(b, r.RequestID...)
	}
	if r.TraceParent != "" && r.Header["Traceparent"] == nil && r.Defaults["Traceparent"] == nil {
		if !ValidHeaderValue(r.TraceParent) {
			return b, fmt.Errorf("%w: Traceparent %q", ErrInvalidHeader, r.TraceParent)
		}
		b = append(b, "\r\nTraceparent: "...)
		b = append(b, r.TraceParent...)
	}
	var err error
	for k, vs := range r.Defaults {
		if _, over := r.Header[http.CanonicalHeaderKey(k)]; over {
			continue
		}
		if b, err = appendField(b, k, vs); err != nil {
			return b, err
		}
	}
	for k, vs := range r.Header {
		if b, err = appendField(b, k, vs); err != nil {
			return b, err
		}
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, r.Body...), nil
}

// isTchar reports whether c may appear in a field name (RFC 9110 §5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// ValidHeaderName reports whether s is a field name (one or more tchars).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether s is a field value: no control characters but HTAB,
// no DEL (RFC 9110 §5.5); obs-text (bytes ≥ 0x80) is allowed as net/http allows it.
func ValidHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// appendField appends one caller header (all its values) unless the writer owns it.
func appendField(b []byte, k string, vs []string) ([]byte, error) {
	ck := http.CanonicalHeaderKey(k)
	if owned(ck) {
		return b, nil
	}
	if !ValidHeaderName(k) {
		return b, fmt.Errorf("%w: name %q", ErrInvalidHeader, k)
	}
	for _, v := range vs {
		if !ValidHeaderValue(v) {
			return b, fmt.Errorf("%w: the value of %q (not shown)", ErrInvalidHeader, ck)
		}
		b = append(b, "\r\n"...)
		b = append(b, ck...)
		b = append(b, ": "...)
		b = append(b, v...)
	}
	return b, nil
}
