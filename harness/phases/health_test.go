package phases

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"pdsoak/ledger"
)

// TestHealth: a health event per recorded probe, the answer's status or the error of
// no answer; On is false after Stop (and for no entry at all).
func TestHealth(t *testing.T) {
	var evs []ledger.Event
	h := NewHealth("router", "http://127.0.0.1:1/health", func(ev ledger.Event) { evs = append(evs, ev) })
	assert.True(t, h.On())
	h.Record(503, nil)
	h.Record(0, ErrHealthTimeout)
	h.Stop()
	assert.False(t, h.On())
	h.Record(200, nil) // a probe started before Stop still records its answer
	assert.Equal(t, []ledger.Event{
		{Type: ledger.EventHealth, Source: "router", URL: "http://127.0.0.1:1/health", Status: 503},
		{Type: ledger.EventHealth, Source: "router", URL: "http://127.0.0.1:1/health", Error: "harness: no answer within 1s"},
		{Type: ledger.EventHealth, Source: "router", URL: "http://127.0.0.1:1/health", Status: 200},
	}, evs)
	var none *Health
	assert.False(t, none.On())
	none.Stop()
}
