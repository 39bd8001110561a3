package api

import (
	"testing"
	"time"

	"pdsoak/server/gen"
)

// TestStampDeadline: the one --request-timeout rule both endpoints and the simulator
// apply: a request's own deadline wins, none gets arrival + timeout, no timeout none.
func TestStampDeadline(t *testing.T) {
	arrival := time.Unix(1_700_000_000, 0)
	own := arrival.Add(time.Second)
	cases := []struct {
		name    string
		timeout time.Duration
		have    time.Time
		want    time.Time
	}{
		{"none set, timeout", 5 * time.Second, time.Time{}, arrival.Add(5 * time.Second)},
		{"own deadline kept", 5 * time.Second, own, own},
		{"no timeout", 0, time.Time{}, time.Time{}},
		{"own deadline, no timeout", 0, own, own},
	}
	for _, c := range cases {
		h := New(nil, WithRequestTimeout(c.timeout))
		req := gen.Request{Deadline: c.have}
		h.StampDeadline(&req, arrival)
		if !req.Deadline.Equal(c.want) {
			t.Errorf("%s: handler: deadline %v, want %v", c.name, req.Deadline, c.want)
		}
		req = gen.Request{Deadline: c.have}
		StampDeadline(&req, arrival, c.timeout)
		if !req.Deadline.Equal(c.want) {
			t.Errorf("%s: deadline %v, want %v", c.name, req.Deadline, c.want)
		}
	}
}
