package judge

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

func TestLivenessObserve(t *testing.T) {
	var s Liveness
	var got []string
	for _, ok := range []bool{true, false, true, false, false, false, true, true} {
		if typ, changed := s.Observe(ok); changed {
			got = append(got, string(typ))
		} else {
			got = append(got, "-")
		}
	}
	// One failed probe is not an outage; two in a row are; the first answer ends it.
	assert.Equal(t, []string{"-", "-", "-", "-", "target_down", "-", "target_up", "-"}, got)
	assert.False(t, s.Down())
}

func TestLivenessEvent(t *testing.T) {
	down := LivenessEvent(ledger.EventTargetDown, "decode-0", "http://127.0.0.1:9/health")
	assert.Equal(t, ledger.Event{Type: ledger.EventTargetDown, Source: "decode-0", URL: "http://127.0.0.1:9/health",
		Message: "decode-0 does not answer its health probe (http://127.0.0.1:9/health) 2 times in a row"}, down)
	up := LivenessEvent(ledger.EventTargetUp, "decode-0", "http://127.0.0.1:9/health")
	assert.Equal(t, "decode-0 answers its health probe again", up.Message)
}
