package api

import (
	"sort"
	"strings"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// FinishOf is the finish reason and usage of a generation's final event ev, after count
// generated tokens of req: the generator's own, or "length" when the budget was spent
// and "stop" otherwise; usage the generator's, its zeros filled from the prompt and the
// count. The endpoints send these, and the simulator's front end (pdsoak/sim) too.
func FinishOf(ev gen.Event, count int, req *gen.Request) (string, Usage) {
	reason := ev.Finish
	if reason == "" {
		reason = "stop"
		if count >= req.MaxTokens {
			reason = "length"
		}
	}
	u := Usage{PromptTokens: ev.PromptTokens, CompletionTokens: ev.CompletionTokens}
	if u.PromptTokens == 0 {
		u.PromptTokens = len(req.Prompt)
	}
	if u.CompletionTokens == 0 {
		u.CompletionTokens = count
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return reason, u
}

// OldestFirst orders in-flight requests as GET /debug/requests lists them: oldest first.
func OldestFirst(reqs []gen.RequestInfo) {
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].AgeSeconds > reqs[j].AgeSeconds })
}

// Piece is the text of ev's tokens, through the answer's stream decoder (which holds
// back an incomplete UTF-8 sequence until the final event flushes it).
func Piece(dec *kernels.StreamDecoder, ev gen.Event) string {
	var text strings.Builder
	for _, id := range ev.Tokens {
		text.WriteString(dec.Push(id))
	}
	if ev.Done {
		text.WriteString(dec.Flush())
	}
	return text.String()
}
