package reports_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/internal/fixture"
	"pdsoak/reports/render"
)

func TestGPUSummaryLine(t *testing.T) {
	evs := []ledger.Event{fixture.Ev(ledger.EventRunStart, 0, nil), reports.Sched("a", 0), reports.GPUSample(2, 0), reports.GPUSample(4, 0), fixture.Done("a", 5, ledger.OutcomeStalled)}
	var md, js bytes.Buffer
	r := reports.Compute(evs, reports.Config{})
	require.NoError(t, render.WriteMarkdown(&md, r))
	assert.Contains(t, md.String(), "- GPU (1 device, 2 samples): utilisation max 0%, mean 0.0%, memory up to 50%; up to **1 request stuck** for 4 s while GPU utilisation averaged **0.0%**\n")
	var tab bytes.Buffer
	require.NoError(t, render.WriteTable(&tab, r))
	assert.Contains(t, tab.String(), "\nGPU (1 device, 2 samples): utilisation max 0%, mean 0.0%, memory up to 50%; up to 1 request stuck for 4 s while GPU utilisation averaged 0.0%\n")
	require.NoError(t, render.WriteJSON(&js, r))
	assert.Contains(t, js.String(), `"stuck_util_mean": 0`)
}
