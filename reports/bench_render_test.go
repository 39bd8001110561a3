package reports_test

import (
	"bytes"
	"testing"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/reports/render"
)

// BenchmarkReportHTML1M reads a 1,000,000-event ledger and writes report.html from it
// (Builder, Results, Timeline, charts, page): the bound is <= 10 s per op and <= 5 MB of
// output, reported as html-MB.
func BenchmarkReportHTML1M(b *testing.B) {
	data, events := reports.SoakLedger(1_000_000)
	var size int
	for b.Loop() {
		bl := reports.NewBuilder(reports.Config{})
		if _, err := ledger.ReadParallel(bytes.NewReader(data), func(e ledger.Event) error { bl.Add(e); return nil }); err != nil {
			b.Fatal(err)
		}
		res := bl.Results()
		tl := bl.Timeline(res)
		if len(tl.Drops) != res.SilentDrops || len(tl.Faults) != 12 {
			b.Fatalf("drops %d of %d, faults %d", len(tl.Drops), res.SilentDrops, len(tl.Faults))
		}
		var out bytes.Buffer
		if err := render.WriteHTML(&out, res, tl, render.HTMLOptions{}); err != nil {
			b.Fatal(err)
		}
		size = out.Len()
		if size > 5e6 {
			b.Fatalf("report.html is %d bytes, over the 5 MB bound", size)
		}
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(size)/1e6, "html-MB")
}
