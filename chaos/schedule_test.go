package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/scenarios"
)

func TestSchedule(t *testing.T) {
	d := func(s string) scenarios.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return scenarios.Duration(v)
	}
	faults := []scenarios.Fault{
		{Name: "a", At: d("5s"), For: d("5s")},
		{Name: "b", At: d("10s")}, // held to the end: no revert step
		{Name: "c", At: d("10s"), For: d("1s")},
	}
	var got []string
	for _, s := range Schedule(faults) {
		got = append(got, s.At.String()+" "+string(s.Kind)+" "+s.Fault.Name)
		assert.Equal(t, faults[s.Index].Name, s.Fault.Name)
	}
	assert.Equal(t, []string{"5s apply a", "10s revert a", "10s apply b", "10s apply c", "11s revert c"}, got,
		"by time; at one instant reverts first, then spec order")
}

func TestVerifyBound(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		name    string
		f       scenarios.Fault
		applied time.Duration
		want    time.Duration // after start
		wantWhy string
	}{
		{"held fault: the verify timeout", scenarios.Fault{At: scenarios.Duration(time.Second)}, time.Second, 11 * time.Second, "within 10s"},
		{"long fault: the verify timeout", scenarios.Fault{At: scenarios.Duration(time.Second), For: scenarios.Duration(time.Minute)}, time.Second, 11 * time.Second, "within 10s"},
		{"short fault: its revert", scenarios.Fault{At: scenarios.Duration(time.Second), For: scenarios.Duration(2 * time.Second)}, time.Second, 3 * time.Second, "before its revert at 3s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deadline, why := VerifyBound(tt.f, start, start.Add(tt.applied), DefaultVerifyTimeout)
			assert.Equal(t, start.Add(tt.want), deadline)
			assert.Equal(t, tt.wantWhy, why)
		})
	}
	assert.Equal(t, 40*time.Millisecond, NextVerifyInterval(VerifyFirstInterval))
	assert.Equal(t, VerifyMaxInterval, NextVerifyInterval(400*time.Millisecond), "capped")
}
