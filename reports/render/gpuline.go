package render

import (
	"fmt"

	"pdsoak/reports"
	"pdsoak/reports/internal/format"
)

// gpuLine is summary.md's line about the GPUs.
func gpuLine(g *reports.GPUResult) string {
	s := fmt.Sprintf("GPU (%s, %s): utilisation max %.0f%%, mean %.1f%%, memory up to %.0f%%",
		format.Plural(len(g.Devices), "device"), format.Plural(g.Samples, "sample"), g.UtilMax, g.UtilMean, g.MemUsedMaxPct)
	switch {
	case g.StuckSamples == 0:
		s += "; never requests in flight without completions"
	case g.StuckUtilMean == nil:
		s += fmt.Sprintf("; up to **%s stuck** for %.0f s (no utilisation reading then)", format.Plural(g.StuckInFlightMax, "request"), g.StuckSeconds)
	default:
		s += fmt.Sprintf("; up to **%s stuck** for %.0f s while GPU utilisation averaged **%.1f%%**",
			format.Plural(g.StuckInFlightMax, "request"), g.StuckSeconds, *g.StuckUtilMean)
	}
	if g.ReadErrors > 0 {
		s += fmt.Sprintf(" (%s incomplete)", format.Plural(g.ReadErrors, "reading"))
	}
	return s
}
