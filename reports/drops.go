package reports

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"pdsoak/ledger"
)

func (b *Builder) dropSummary(r *Results) string {
	if len(r.Drops) == 0 {
		return ""
	}
	phases := map[ledger.Phase]int{}
	for _, d := range r.Drops {
		phases[d.Phase]++
	}
	keys := make([]string, 0, len(phases))
	for p := range phases {
		keys = append(keys, string(p))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		name := k
		if name == "" {
			name = "unknown"
		}
		parts[i] = fmt.Sprintf("%s %d", name, phases[ledger.Phase(k)])
	}
	ids := make([]string, 0, 3)
	for _, d := range r.Drops[:min(3, len(r.Drops))] {
		ids = append(ids, d.RequestID)
	}
	held := ""
	if len(r.DropStages) > 0 {
		keys := make([]string, 0, len(r.DropStages))
		for k := range r.DropStages {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hp := make([]string, len(keys))
		for i, k := range keys {
			hp[i] = fmt.Sprintf("%s %d", k, r.DropStages[k])
		}
		held = "; server held them at: " + strings.Join(hp, ", ")
	}
	return fmt.Sprintf("; by phase: %s%s; e.g. %s", strings.Join(parts, ", "), held, strings.Join(ids, ", "))
}

// HeldAt reads the per-process stages out of a drop's server debug info. It accepts the
// harness's shape ({"sources": [{"process", "entries": [{"stage"}]}]}) and a bare
// /debug/requests entry ({"stage"}); anything else yields nothing.
func HeldAt(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var dbg struct {
		Stage   string `json:"stage"`
		Sources []struct {
			Process string `json:"process"`
			Entries []struct {
				Stage string `json:"stage"`
			} `json:"entries"`
		} `json:"sources"`
	}
	if json.Unmarshal(raw, &dbg) != nil {
		return nil
	}
	var out []string
	for _, src := range dbg.Sources {
		if len(src.Entries) > 0 && src.Entries[0].Stage != "" {
			out = append(out, src.Process+": "+src.Entries[0].Stage)
		}
	}
	if len(out) == 0 && dbg.Stage != "" {
		out = append(out, dbg.Stage)
	}
	return out
}

func (b *Builder) idList(os ...ledger.Outcome) string {
	var ids []string
	for _, o := range os {
		ids = append(ids, b.badIDs[o]...)
	}
	if len(ids) == 0 {
		return ""
	}
	return "; e.g. " + strings.Join(ids[:min(5, len(ids))], ", ")
}
