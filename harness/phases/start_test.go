package phases

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

// TestStartOrder: a run's start steps run once each, in Start's order, nil ones
// skipped; the window runs to its end only when there are faults.
func TestStartOrder(t *testing.T) {
	for _, faults := range []bool{true, false} {
		t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
			var got []string
			step := func(name string) func() { return func() { got = append(got, name) } }
			s := Start{
				Window:    func(toEnd bool) { got = append(got, fmt.Sprintf("window toEnd=%v", toEnd)) },
				Workloads: step("workloads"),
				Open:      step("open"),
				Probes:    step("probes"),
				PD:        step("pd"),
				Samplers:  step("samplers"),
			}
			want := []string{"samplers", "pd", "probes", "open"}
			if faults {
				s.Faults = step("faults")
				want = append(want, "faults")
			}
			s.Run()
			assert.Equal(t, append(want, "workloads", fmt.Sprintf("window toEnd=%v", faults)), got,
				"Watches is nil: skipped")
		})
	}
	Start{}.Run() // every step nil: nothing to do
}

func TestLoadStartedEvent(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := LoadStartedEvent(t0, 3, 90*time.Second)
	assert.Equal(t, ledger.Event{Time: t0, Type: ledger.EventLog, Message: "load started: 3 workloads for 1m30s"}, ev)
}
