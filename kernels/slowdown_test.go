package kernels

import (
	"strings"
	"testing"
	"time"
)

// TestStepTimeSlowdown: a slowdown scales every step of the same seed's jitter by
// exactly 1 + Slowdown, so a calibration pair differs only by the known regression.
func TestStepTimeSlowdown(t *testing.T) {
	a := newSim(t, func(c *Config) { c.Jitter = 0.05; c.Seed = 7 })
	b := newSim(t, func(c *Config) { c.Jitter = 0.05; c.Seed = 7; c.Slowdown = 0.25 })
	for i := range 50 {
		x, y := a.StepTime(5, 30), b.StepTime(5, 30)
		want := time.Duration(float64(x) * 1.25)
		if d := y - want; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("step %d: %v with slowdown 0.25, want %v (1.25 × %v)", i, y, want, x)
		}
	}
}

func TestSlowdownValidated(t *testing.T) {
	c := DefaultConfig()
	c.Backend, c.Slowdown = BackendSimTime, -0.5
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Slowdown") {
		t.Fatalf("error %v, want one naming Slowdown", err)
	}
}
