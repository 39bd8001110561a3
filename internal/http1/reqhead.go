package http1

import "strings"

// MaxSimpleHead bounds the request heads ParseRequestHead reads; a longer one is for
// net/http (a worker's /generate head from the router is about 250 bytes).
const MaxSimpleHead = 8 << 10

// RequestHead is a request head ParseRequestHead accepted.
type RequestHead struct {
	Method, Target string
	ContentLength  int64
	Close          bool // Connection: close
	Host           string
	Fields         int // header fields, Host included
}

// RequestHeadEnd returns the index just past the blank line (CRLF CRLF) that ends a
// request head in b, or -1.
func RequestHeadEnd(b []byte) int { return headEnd(b) }

// ParseRequestHead parses the simple request heads a server may answer without net/http:
// an HTTP/1.1 request line with an origin-form target of plain path characters (no
// query, no escapes), CRLF line ends, exactly one Host and one Content-Length, every
// field name a token and every value free of control characters, and no
// Transfer-Encoding, Expect, Upgrade, TE or Trailer. Anything else, malformed or merely
// unusual, is declined (ok false): the caller hands the connection to net/http, which
// answers it as it always did, errors included. Every accepted head means to net/http
// what it means here (FuzzParseRequestHead). field is called with each header field in
// order (Host included), its value trimmed of surrounding blanks, as substrings of head.
func ParseRequestHead(head string, field func(name, value string)) (RequestHead, bool) {
	var h RequestHead
	if len(head) > MaxSimpleHead || !strings.HasSuffix(head, "\r\n\r\n") {
		return h, false
	}
	line, rest, _ := strings.Cut(head, "\r\n")
	method, line, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(line, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || !ValidHeaderName(method) || !plainPath(target) {
		return h, false
	}
	h.Method, h.Target, h.ContentLength = method, target, -1
	hosts, lengths, conns := 0, 0, 0
	for {
		line, rest, _ = strings.Cut(rest, "\r\n")
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !ValidHeaderName(name) {
			return h, false // obs-fold (a leading blank) too
		}
		value = strings.Trim(value, " \t")
		if !ValidHeaderValue(value) {
			return h, false
		}
		switch {
		case equalFold(name, "Host"):
			if hosts++; !plainHost(value) {
				return h, false
			}
			h.Host = value
		case equalFold(name, "Content-Length"):
			n, ok := digits(value)
			if lengths++; !ok {
				return h, false
			}
			h.ContentLength = n
		case equalFold(name, "Connection"):
			conns++
			for tok := range strings.SplitSeq(value, ",") {
				switch tok = strings.Trim(tok, " \t"); {
				case equalFold(tok, "close"):
					h.Close = true
				case equalFold(tok, "keep-alive"):
				default:
					return h, false
				}
			}
		case equalFold(name, "Transfer-Encoding"), equalFold(name, "Expect"),
			equalFold(name, "Upgrade"), equalFold(name, "Te"), equalFold(name, "Trailer"):
			return h, false
		}
		h.Fields++
		if field != nil {
			field(name, value)
		}
	}
	if hosts != 1 || lengths != 1 || conns > 1 || rest != "" {
		return h, false
	}
	return h, true
}

// plainPath is an origin-form target of unreserved characters and slashes only, so that
// its path is itself (nothing to unescape, no query).
func plainPath(s string) bool {
	if s == "" || s[0] != '/' || len(s) > 1024 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
			return false
		}
	}
	return true
}

// plainHost is a Host value of name or address characters and a port.
func plainHost(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// digits parses a Content-Length of at most 15 decimal digits.
func digits(s string) (int64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}
