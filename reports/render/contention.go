package render

import (
	"pdsoak/ledger"
)

// contentionChart is the title and unit of a contention metric's chart in report.html.
func contentionChart(metric string) (title, unit string, ok bool) {
	switch metric {
	case ledger.ContentionCPUPressure:
		return "Machine contention: CPU pressure (share of each window some task waited for a CPU)", "share", true
	case ledger.ContentionSteal:
		return "Machine contention: CPU steal (share of CPU time)", "share", true
	case ledger.ContentionRunQueue:
		return "Machine contention: runnable tasks per CPU", "tasks/CPU", true
	case ledger.ContentionHarnessCPU:
		return "Machine contention: the harness's own CPU use", "CPUs", true
	case ledger.ContentionTickLag:
		return "Machine contention: harness tick lag", "seconds", true
	case ledger.ContentionRunDelay:
		return "Machine contention: the harness threads' wait for a CPU per wake-up", "seconds", true
	}
	return "", "", false
}
