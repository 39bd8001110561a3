package ledger

import (
	"sync/atomic"
	"time"
)

// A request's events carry times within the same second, and formatting a time
// (time.Time.AppendFormat, RFC 3339 with nanoseconds) was a tenth of the appender's CPU.
// Everything but the fraction depends only on the second and the location, so each
// second's "2006-01-02T15:04:05" and zone ("Z", "+01:00") are formatted once and kept in
// a small table (by second, so a done event's scheduled time, seconds before its own,
// seldom evicts the current second); the fraction is appended by hand.

// secondFormat is one second's formatted date-time and zone in one location; ok is
// false where MarshalJSON fails (a year of other than four digits, a zone offset of 24
// hours or more).
type secondFormat struct {
	sec  int64
	loc  *time.Location
	date string // "2006-01-02T15:04:05"
	zone string // "Z" or "-07:00"
	ok   bool
}

var secondFormats [16]atomic.Pointer[secondFormat]

// appendTime writes t quoted as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, no monotonic reading), and ok false where MarshalJSON fails.
func appendTime(b []byte, t time.Time) (_ []byte, ok bool) {
	sec, loc := t.Unix(), t.Location()
	slot := &secondFormats[uint64(sec)%uint64(len(secondFormats))]
	f := slot.Load()
	if f == nil || f.sec != sec || f.loc != loc {
		f = formatSecond(t, sec, loc)
		slot.Store(f)
	}
	if !f.ok {
		return b, false
	}
	b = append(b, '"')
	b = append(b, f.date...)
	b = appendFraction(b, t.Nanosecond())
	b = append(b, f.zone...)
	return append(b, '"'), true
}

// formatSecond formats t's second as AppendFormat does, and checks it as MarshalJSON
// does: on the written bytes, cheaper than asking t for its year and zone first.
func formatSecond(t time.Time, sec int64, loc *time.Location) *secondFormat {
	b := t.AppendFormat(make([]byte, 0, 32), time.RFC3339)
	f := &secondFormat{sec: sec, loc: loc}
	const date = len("2006-01-02T15:04:05")
	if len(b) < date+1 || b[len("9999")] != '-' {
		return f
	}
	if n := len(b); b[n-1] != 'Z' {
		c := b[n-len("Z07:00")]
		if ('0' <= c && c <= '9') || 10*(b[n-5]-'0')+(b[n-4]-'0') >= 24 {
			return f
		}
	}
	f.date, f.zone, f.ok = string(b[:date]), string(b[date:]), true
	return f
}

// appendFraction appends RFC3339Nano's ".999999999": the nanoseconds without their
// trailing zeros, nothing when there are none.
func appendFraction(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
	var d [10]byte
	d[0] = '.'
	for i := 9; i >= 1; i-- {
		d[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := 10
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}
