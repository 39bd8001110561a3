package telemetry

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// scrape GETs url and parses the text exposition.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytesReader(body))
	require.NoError(t, err)
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				out[name] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestListenServesMetricsOnLoopback(t *testing.T) {
	m := NewMetrics(Labels{Scenario: "s"}, true)
	l, err := Listen("127.0.0.1:0", m.Gatherer())
	require.NoError(t, err)
	url := "http://" + l.Addr() + "/metrics"

	before := scrape(t, url)
	assert.Equal(t, 0.0, before[SeriesRequests])
	assert.Contains(t, before, "go_goroutines", "a /metrics endpoint carries the runtime's series")
	feed(m)
	after := scrape(t, url)
	assert.Equal(t, 3.0, after[SeriesRequests], "the series moved between scrapes")
	assert.Equal(t, 1.0, after[SeriesInFlight])
	assert.Equal(t, 3.0, after[SeriesE2E+"_count"])

	resp, err := http.Post(url, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	require.NoError(t, l.Close(context.Background()))
	_, err = http.Get(url)
	assert.Error(t, err, "closed")
	m.Observe(ledger.Event{Type: ledger.EventDone}) // observing after close is harmless
}

func TestListenBadAddress(t *testing.T) {
	_, err := Listen("127.0.0.1:notaport", NewMetrics(Labels{}, false).Gatherer())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "telemetry: metrics listener")
}
