// Package dashboards ships the Grafana dashboard of a live pdsoak run (pdsoak.json):
// outcomes by cause, requests in flight, TTFT / inter-token / end-to-end percentiles,
// silent drops, fault windows (as annotations and as a panel) and the harness's own lag,
// all from the pdsoak_* series that `harness run --metrics-listen` serves and
// `--prometheus-remote-write` pushes. Import it in Grafana (Dashboards → New → Import)
// and pick the Prometheus data source. The test checks every query names a series the
// harness exports.
package dashboards

import _ "embed"

// PDSoak is pdsoak.json.
//
//go:embed pdsoak.json
var PDSoak []byte
