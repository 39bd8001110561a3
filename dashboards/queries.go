package dashboards

import (
	"encoding/json"
	"fmt"
)

// Query is one PromQL expression of the dashboard and where it is.
type Query struct {
	Where, Expr, Legend string
}

// Queries lists every PromQL expression of a dashboard: panel targets (nested rows
// included) and annotation queries.
func Queries(dashboard []byte) ([]Query, error) {
	var d struct {
		Panels      []panel `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("dashboards: %w", err)
	}
	var out []Query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr, Legend: t.LegendFormat})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			out = append(out, Query{Where: fmt.Sprintf("annotation %q", a.Name), Expr: a.Expr})
		}
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's panels
}
