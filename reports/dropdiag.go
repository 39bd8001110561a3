package reports

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"pdsoak/reports/internal/format"
)

// held is where one process held a dropped request ("decode-0", "prealloc").
type held struct{ process, stage string }

func (h held) String() string { return h.process + ": " + h.stage }

// role is the PD role a process name says (router, prefill, decode; "" otherwise).
func (h held) role() string {
	for _, r := range []string{"router", "prefill", "decode"} {
		if h.process == r || strings.HasPrefix(h.process, r+"-") {
			return r
		}
	}
	return ""
}

// rootStage decides, for one dropped request, the stage where it stopped progressing
// first and the stages only waiting on it, from what each process's /debug/requests
// said. The waits of a PD request: prefill's bootstrap waits for decode to register
// the room (its prealloc); decode's transfer waits for prefill's KV (its waiting,
// forward, inflight); the router's legs wait on the workers. A decode stage other than
// transfer is held by decode itself.
func rootStage(hs []held) (root held, waiting []held) {
	if len(hs) == 0 {
		return held{}, nil
	}
	var dec, pre *held
	for i := range hs {
		switch hs[i].role() {
		case "decode":
			if dec == nil {
				dec = &hs[i]
			}
		case "prefill":
			if pre == nil {
				pre = &hs[i]
			}
		}
	}
	switch {
	case dec != nil && dec.stage == "transfer" && pre != nil && pre.stage != "bootstrap":
		root = *pre // decode waits for the KV prefill has not sent
	case dec != nil:
		root = *dec
	case pre != nil:
		root = *pre
	default:
		root = hs[0]
	}
	for _, h := range hs {
		if h != root {
			waiting = append(waiting, h)
		}
	}
	return root, waiting
}

// dropDiagnosis accumulates the root stages of the silent drops.
type dropDiagnosis struct {
	roots   map[string]int            // "decode-0: prealloc" -> drops
	waiting map[string]map[string]int // root -> waiting "prefill-0: bootstrap" -> drops
	seen    []heldSeen                // every stage seen, for the gauges' notes
}

// add folds one drop's server debug answer, asked for just before at.
func (d *dropDiagnosis) add(raw json.RawMessage, at time.Time) {
	var hs []held
	for _, s := range HeldAt(raw) {
		p, st, ok := strings.Cut(s, ": ")
		if !ok {
			continue // a bare entry names no process
		}
		hs = append(hs, held{process: p, stage: st})
	}
	if len(hs) == 0 {
		return
	}
	for _, h := range hs {
		if len(d.seen) < maxHeldSeen {
			d.seen = append(d.seen, heldSeen{h: h, at: at})
		}
	}
	root, waiting := rootStage(hs)
	if d.roots == nil {
		d.roots, d.waiting = map[string]int{}, map[string]map[string]int{}
	}
	d.roots[root.String()]++
	if d.waiting[root.String()] == nil {
		d.waiting[root.String()] = map[string]int{}
	}
	for _, w := range waiting {
		d.waiting[root.String()][w.String()]++
	}
}

// sentence is the one-line diagnosis of the most common root ("" without any): "60
// silent drops held in decode-0's prealloc; prefill-0 (bootstrap) and router are
// waiting on it".
func (d *dropDiagnosis) sentence() string {
	if len(d.roots) == 0 {
		return ""
	}
	keys := format.SortedKeys(d.roots)
	sort.SliceStable(keys, func(i, j int) bool { return d.roots[keys[i]] > d.roots[keys[j]] })
	top := keys[0]
	p, st, _ := strings.Cut(top, ": ")
	s := fmt.Sprintf("%s held in %s's %s stage", format.Plural(d.roots[top], "silent drop"), p, st)
	if w := d.waiting[top]; len(w) > 0 {
		ws := format.SortedKeys(w)
		parts := make([]string, len(ws))
		for i, k := range ws {
			wp, wst, _ := strings.Cut(k, ": ")
			parts[i] = fmt.Sprintf("%s (%s)", wp, wst)
		}
		verb := "is"
		if len(parts) > 1 {
			verb = "are"
		}
		s += fmt.Sprintf("; %s %s waiting on it", strings.Join(parts, " and "), verb)
	}
	if len(keys) > 1 {
		rest := make([]string, 0, len(keys)-1)
		for _, k := range keys[1:] {
			rest = append(rest, fmt.Sprintf("%s %d", k, d.roots[k]))
		}
		s += "; elsewhere: " + strings.Join(rest, ", ")
	}
	return s
}
