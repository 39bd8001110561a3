package ledger

// Event types of the PD-path and health-truth checks (issue 26). Kept apart from the
// main list so the vocabulary grows without touching it.
const (
	// EventPDCounter is one scrape of a prefill process's counter that proves a prefill
	// (target.pd_counters): Source is the process, Metrics holds {selector: value}; a
	// scrape that failed or found no such series has Error and no Metrics. The
	// pd_path assertion compares the counter's rise with the requests completed ok.
	EventPDCounter EventType = "pd_counter"
	// EventHealth is one probe of the entry process's health endpoint: Source is the
	// process, URL the probed address, Status the HTTP status (0: no answer, Error
	// says why). The truthful_health assertion compares it with the requests' outcomes.
	EventHealth EventType = "health"

	// PDCounterAbsent is the Cause of a pd_counter event whose process answered its
	// /metrics without any series of the selector: a labelled counter has none until
	// its first increment, so before the first reading that finds one it reads 0.
	PDCounterAbsent = "absent"
)
