package scenarios

import (
	"slices"
	"strings"

	"pdsoak/traces"
)

// checkTrace validates a trace workload's trace block and loads the trace (every
// problem of the file, with its line, becomes a problem of the scenario). The parsed
// trace is kept for the plan and the run.
func (v *validator) checkTrace(p string, w Workload) {
	if w.Type != WorkloadTrace {
		if w.Trace != nil && w.Type != "" {
			v.add(p+".trace", "only applies to type trace, not %s", w.Type)
		}
		return
	}
	if v.sc.IsSet(p + ".count") {
		v.add(p+".count", "does not apply to type trace: use trace.limit")
	}
	// Lengths come from the trace, capped by trace.max_tokens. A rendered scenario
	// writes prompt_tokens and max_tokens back as defaulted, so those values pass; any
	// other would be ignored while the user thinks it applies.
	t := w.Trace
	wantMax := DefaultMaxTokens
	if t != nil && t.MaxTokens > 0 {
		wantMax = t.MaxTokens // traceDefaults copied it
	}
	if v.sc.IsSet(p+".max_tokens") && w.MaxTokens != wantMax {
		v.add(p+".max_tokens", "does not apply to type trace: each request's comes from the trace (cap it with trace.max_tokens)")
	}
	if v.sc.IsSet(p+".prompt_tokens") && w.PromptTokens != DefaultPromptTokens {
		v.add(p+".prompt_tokens", "does not apply to type trace: lengths come from the trace (scale them with trace.block_tokens)")
	}
	if t == nil {
		v.add(p+".trace", "must be set for type trace: {file: ..., format: mooncake|azure|burstgpt}")
		return
	}
	p += ".trace"
	if t.Format != "" && !slices.Contains(traces.Formats, t.Format) {
		v.add(p+".format", "must be mooncake, azure or burstgpt (or unset: detected), got %q", t.Format)
	}
	// 0 would silently mean the trace's own pace: only an absent key does.
	if t.Speedup < 0 || (t.Speedup == 0 && v.sc.IsSet(p+".speedup")) {
		v.add(p+".speedup", "must be > 0 (leave it out for the trace's own pace)")
	}
	if t.Rate < 0 || (t.Rate == 0 && v.sc.IsSet(p+".rate")) {
		v.add(p+".rate", "must be > 0 requests per second (leave it out for the trace's own pace)")
	}
	if t.Rate > 0 && t.Speedup > 0 {
		v.add(p+".rate", "set rate or speedup, not both")
	}
	if t.Start < 0 {
		v.add(p+".start", "must be ≥ 0")
	}
	if t.Limit < 0 || t.Limit > traces.MaxRequests {
		v.add(p+".limit", "must be in [0, %d] (0: every request in the window)", traces.MaxRequests)
	}
	if t.MaxTokens < 0 {
		v.add(p+".max_tokens", "must be ≥ 0 (0: the trace's output length)")
	}
	if t.BlockTokens < 0 || t.BlockTokens > 4*traces.BlockTokens {
		v.add(p+".block_tokens", "must be in [0, %d] (0: 512, the trace's own lengths)", 4*traces.BlockTokens)
	}
	if t.File == "" {
		v.add(p+".file", "must be set (a path relative to the scenario file)")
		return
	}
	tr, err := v.sc.LoadTrace(t)
	if err != nil {
		// A problem names the trace's file, line and field; package names are noise.
		v.add(p+".file", "%s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "scenarios: "), "traces: ", ""))
		return
	}
	t.parsed = tr
	window := w.Duration.D()
	if window == 0 {
		window = v.sc.Duration.D() - w.Start.D()
	}
	if window > 0 && len(tr.Window(t.Window(window))) == 0 {
		v.add(p, "no request of the trace falls in the workload's window (%s from trace.start %s)", window, t.Start)
	}
}
