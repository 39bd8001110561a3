package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/assertion"
	"pdsoak/ledger"
	"pdsoak/reports/internal/format"
)

// AssertExplainedErrors: every explicit error (ErrorCounted) has a cause other than
// "unexplained", and no target went down outside a fault and stayed down.
// "explained_errors(rate < 0.001)" and "explained_errors(count <= 3)" bound the
// unexplained errors instead of allowing none.
const AssertExplainedErrors = assertion.AssertExplainedErrors

// AssertTargetAlive is the check reports adds by itself when a target went down
// outside any fault and never came back and explained_errors is not listed: a dead
// target never passes, whatever the scenario asked.
const AssertTargetAlive = "target_alive"

// LivenessResult is one outage of a probed source (the target or a launched process):
// when it stopped answering its health probe and when it answered again (offsets in
// seconds from the start of the run; Up nil: never again), and the fault that
// explains it ("" when none does).
type LivenessResult struct {
	Source string   `json:"source"`
	Down   float64  `json:"down"`
	Up     *float64 `json:"up,omitempty"`
	Fault  string   `json:"fault,omitempty"`
	// Expected: the fault declared the source stays down (restart: false), so its not
	// coming back is what the scenario asked for.
	Expected bool   `json:"expected,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// dead reports whether the outage fails a run: no fault explains it, or it never
// ended although its fault did not declare the source stays down.
func (l LivenessResult) dead() bool {
	return !l.Explained() || (l.Up == nil && !l.Expected)
}

// Explained reports whether a fault explains the outage.
func (l LivenessResult) Explained() bool { return l.Fault != "" }

// pendingCause is a non-ok request whose done event carried no cause: attributed at
// the end, when every fault's window is known.
type pendingCause struct {
	outcome    ledger.Outcome
	start, end time.Time
	ev         ledger.Event
}

// explainAcc gathers what causes and liveness need from the ledger.
type explainAcc struct {
	faults  FaultTracker
	pending []pendingCause
	// causes and byWorkload count the causes recorded in done events.
	causes     map[string]int
	byWorkload map[string]map[string]int
	// unexplained are up to 5 unexplained error ids, for the detail.
	unexplained []string
	unexplN     int
	// outages per source, in ledger order; open ones have a zero up.
	outages []outage
	// diag ranks where the silent drops stopped; noFirst counts the requests that
	// ended without ever getting a first token.
	diag    dropDiagnosis
	noFirst int
	// list are the first maxListed unexplained errors with their trace ids
	// (results.json's unexplained, report.html's table).
	list      []UnexplainedError
	maxListed int
	// unexplAt are the scheduled times of the unexplained errors (up to maxUnexplMarks),
	// marked on the report's timeline.
	unexplAt []time.Time
}

// maxUnexplMarks bounds the unexplained errors marked on the timeline.
const maxUnexplMarks = 10_000

type outage struct {
	source   string
	down, up time.Time
}

// add folds the fault and liveness events.
func (x *explainAcc) add(e ledger.Event) {
	switch e.Type {
	case ledger.EventFaultStart, ledger.EventFaultStop:
		x.faults.Add(e)
	case ledger.EventTargetDown:
		for _, o := range x.outages {
			if o.source == e.Source && o.up.IsZero() {
				return // already down
			}
		}
		x.outages = append(x.outages, outage{source: e.Source, down: e.Time})
	case ledger.EventTargetUp:
		for i := range x.outages {
			if x.outages[i].source == e.Source && x.outages[i].up.IsZero() {
				x.outages[i].up = e.Time
			}
		}
	}
}

// done folds one terminal request (o is its validated outcome).
func (x *explainAcc) done(e ledger.Event, o ledger.Outcome) {
	if o == ledger.OutcomeOK {
		return
	}
	if e.TTFT == 0 {
		x.noFirst++
	}
	if o.SilentDrop() {
		x.diag.add(e.ServerDebug, e.Time)
	}
	// No cause yet (the simulator's or an older ledger), or "unexplained" as the runner
	// saw it when the request ended: a fault's start may be written just after the
	// requests it cut ended, so those are judged again once every window is known.
	if e.Cause == "" || e.Cause == ledger.CauseUnexplained {
		start := e.Time.Add(-time.Duration(e.E2E * float64(time.Second)))
		if e.Scheduled != nil {
			start = *e.Scheduled
		}
		e.ITL, e.ServerDebug, e.Text = nil, nil, "" // not needed: keep pending small
		x.pending = append(x.pending, pendingCause{outcome: o, start: start, end: e.Time, ev: e})
		return
	}
	start := e.Time
	if e.Scheduled != nil {
		start = *e.Scheduled
	}
	x.count(e.Cause, o, e, start)
}

func (x *explainAcc) count(cause string, o ledger.Outcome, e ledger.Event, start time.Time) {
	workload, id := e.Workload, e.RequestID
	if x.causes == nil {
		x.causes = map[string]int{}
		x.byWorkload = map[string]map[string]int{}
	}
	x.causes[cause]++
	if workload != "" {
		if x.byWorkload[workload] == nil {
			x.byWorkload[workload] = map[string]int{}
		}
		x.byWorkload[workload][cause]++
	}
	if cause == ledger.CauseUnexplained && ErrorCounted(o) {
		if len(x.unexplAt) < maxUnexplMarks {
			x.unexplAt = append(x.unexplAt, start)
		}
		x.unexplN++
		if len(x.unexplained) < 5 {
			x.unexplained = append(x.unexplained, id)
		}
		if len(x.list) < x.maxListed {
			x.list = append(x.list, UnexplainedError{RequestID: id, Workload: workload, Outcome: o,
				Status: e.Status, Error: e.Error, TraceID: e.TraceID, end: e.Time})
		}
	}
}

// results attributes the pending requests and fills r's causes and liveness (before
// the assertions are judged). margin is the cause margin.
func (x *explainAcc) results(r *Results, start time.Time, margin time.Duration) {
	windows := x.faults.Windows()
	for _, p := range x.pending {
		x.count(Cause(CauseRequest{Outcome: p.outcome, Start: p.start, End: p.end}, windows, margin), p.outcome, p.ev, p.start)
	}
	x.pending = nil
	for i := range x.list {
		x.list[i].At = x.list[i].end.Sub(start).Seconds()
	}
	r.Unexplained = x.list
	if len(x.causes) > 0 {
		r.Causes = x.causes
		for w, m := range x.byWorkload {
			if wr, ok := r.ByWorkload[w]; ok {
				wr.Causes = m
				r.ByWorkload[w] = wr
			}
		}
	}
	r.UnexplainedErrors = x.unexplN
	r.NoFirstToken = x.noFirst
	r.DropRoots, r.DropDiagnosis = x.diag.roots, x.diag.sentence()
	for _, o := range x.outages {
		l := LivenessResult{Source: o.source, Down: o.down.Sub(start).Seconds()}
		if !o.up.IsZero() {
			l.Up = Float(o.up.Sub(start).Seconds())
		}
		if f, ok := outageFault(o, windows, margin); ok {
			// restart: false excuses only what the fault stopped, not a process that
			// died beside it.
			l.Fault, l.Expected = f.Name, f.Permanent && f.aimedAt(o.source)
		}
		l.Detail = outageSentence(l)
		r.Liveness = append(r.Liveness, l)
	}
	for _, l := range r.Liveness {
		if l.dead() {
			r.Notes = append(r.Notes, l.Detail)
		}
	}
}

// outageFault is the fault that explains an outage: the first acting on the source
// itself when it went down (or within margin after), else the first acting on anything
// then (a fault elsewhere in the topology may still take a process down).
func outageFault(o outage, windows []FaultWindow, margin time.Duration) (FaultWindow, bool) {
	var first *FaultWindow
	for i, f := range windows {
		if clientFaultTypes[f.Type] || !f.overlaps(o.down, o.down, margin) {
			continue
		}
		if f.aimedAt(o.source) {
			return f, true
		}
		if first == nil {
			first = &windows[i]
		}
	}
	if first == nil {
		return FaultWindow{}, false
	}
	return *first, true
}

// aimedAt reports whether the fault's target names the liveness source: the process
// itself, or its role (the reference topology names a role's processes role-N).
func (f FaultWindow) aimedAt(source string) bool {
	return f.Target == source || strings.HasPrefix(source, f.Target+"-")
}

// outageSentence says what happened to a source in one sentence.
func outageSentence(l LivenessResult) string {
	s := fmt.Sprintf("%s went down at %.1f s", l.Source, l.Down)
	if l.Up == nil {
		s += " and did not come back"
	} else {
		s += fmt.Sprintf(" and was back at %.1f s", *l.Up)
	}
	if l.Expected {
		return s + " (fault " + l.Fault + ", restart: false)"
	}
	if l.Explained() {
		return s + " (fault " + l.Fault + ")"
	}
	return s + ", outside any declared fault"
}

// deadSources are the outages that fail a run: outside any fault, or never over
// although no fault declared the source stays down.
func deadSources(r *Results) []string {
	var out []string
	for _, l := range r.Liveness {
		if l.dead() {
			out = append(out, l.Detail)
		}
	}
	return out
}

// judgeExplained decides explained_errors: the unexplained explicit errors against the
// bound, and every outage that no fault explains or that never ended.
func judgeExplained(a Assertion, r *Results) (State, string, bool) {
	if !a.Explained() {
		return "", "", false
	}
	errs := 0
	for o, n := range r.Outcomes {
		if ErrorCounted(o) {
			errs += n
		}
	}
	n := r.UnexplainedErrors
	ok := n == 0
	bound := "none allowed"
	switch a.Arg {
	case "count":
		ok = a.Compare(float64(n))
		bound = fmt.Sprintf("bound: count %s %g", a.Op, a.Value)
	case "rate":
		if r.Requests > 0 {
			ok = a.Compare(float64(n) / float64(r.Requests))
		}
		bound = fmt.Sprintf("bound: rate %s %g", a.Op, a.Value)
	}
	detail := fmt.Sprintf("%d of %s unexplained (%s)%s", n, format.Plural(errs, "explicit error"), bound, causeList(r.Causes))
	if dead := deadSources(r); len(dead) > 0 {
		return StateFail, strings.Join(dead, "; ") + "; " + detail, true
	}
	return newState(ok), detail, true
}

// causeList is "; causes: fault:kill 12, refused 3, unexplained 1" (empty when none).
func causeList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := format.SortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "; causes: " + strings.Join(parts, ", ")
}

// livenessCheck is the target_alive assertion reports adds when a source went down
// outside any fault or never came back and the scenario does not list explained_errors.
func livenessCheck(r *Results, listed []Assertion) (AssertionResult, bool) {
	dead := deadSources(r)
	if len(dead) == 0 {
		return AssertionResult{}, false
	}
	for _, a := range listed {
		if a.Explained() {
			return AssertionResult{}, false
		}
	}
	return AssertionResult{Name: AssertTargetAlive, State: StateFail, Detail: strings.Join(dead, "; ")}, true
}

// marks are the unexplained errors' times in seconds since origin, sorted.
func (x *explainAcc) marks(origin time.Time) []float64 {
	if len(x.unexplAt) == 0 {
		return nil
	}
	out := make([]float64, len(x.unexplAt))
	for i, t := range x.unexplAt {
		out[i] = round(t.Sub(origin).Seconds())
	}
	sort.Float64s(out)
	return out
}
