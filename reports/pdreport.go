package reports

import "pdsoak/reports/internal/format"

// pdTimeline is pd_path's per-window share for report.html (percent, at each window's
// middle) and the windows that fell short, shaded.
func pdTimeline(r *Results) (*Series, []Span) {
	if r == nil || r.PDPath == nil || len(r.PDPath.Windows) == 0 {
		return nil, nil
	}
	s := &Series{Name: "prefill share"}
	var below []Span
	for _, w := range r.PDPath.Windows {
		if w.Share == nil {
			continue
		}
		s.Points = append(s.Points, Point{round((w.Start + w.End) / 2), round(100 * *w.Share)})
		if !w.Below {
			continue
		}
		if n := len(below); n > 0 && below[n-1].To == w.Start {
			below[n-1].To = w.End
			continue
		}
		below = append(below, Span{From: w.Start, To: w.End, Label: "prefill share below " + format.Pct(r.PDPath.MinShare)})
	}
	return s, below
}
