package workload

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"pdsoak/harness/client"
	"pdsoak/reports"
)

// Agents runs N sessions in parallel, each a sequence of turns over a growing
// conversation, like the multi-agent tool of the incident.
type Agents struct {
	Common
}

// toolNames alternate: each turn the agent "writes" then, next turn, "saves".
var toolNames = [...]string{"write", "save"}

// Run implements Workload.
func (a *Agents) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, until := a.window(start)
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if !sleepCtx(wctx, time.Until(from)) {
		return Stats{}
	}
	n := max(a.Spec.Agents, 1)
	counts := make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(session int) {
			defer wg.Done()
			counts[session-1] = a.session(wctx, session, s)
		}(i + 1)
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	return Stats{Requests: total}
}

// session runs one agent's turns. A request that hangs blocks the session until its
// deadline: the next turn is only sent once the previous one resolved.
func (a *Agents) session(ctx context.Context, session int, s Sender) int {
	rng := a.rng(uint64(session))
	system := fmt.Sprintf("You are agent %d. ", session) + Text(rng, max(a.Spec.PromptTokens, 1))
	conv := []client.Message{
		{Role: "system", Content: system},
		{Role: "user", Content: fmt.Sprintf("Task %d: %s", session, Text(rng, 48))},
	}
	sent := 0
	for turn := 1; a.Spec.Turns == 0 || turn <= a.Spec.Turns; turn++ {
		if ctx.Err() != nil {
			break
		}
		id := fmt.Sprintf("%s-s%03d-t%03d", a.Spec.Name, session, turn)
		req := &Req{Request: a.base(id, time.Now()), Workload: a.Spec.Name, Session: session, Turn: turn}
		req.Messages = append([]client.Message(nil), conv...)
		if a.Spec.Endpoint == "completions" {
			req.Prompt = flatten(conv)
			req.Messages = nil
		}
		for _, m := range conv {
			req.PromptBytes += len(m.Content)
		}
		// Once sent, the request runs to its own deadline (the Sender bounds it, not the
		// workload window); the runner's drain waits for it.
		res := s.Send(ctx, req)
		sent++
		if res.Outcome == reports.OutcomeCancelled && ctx.Err() != nil {
			break
		}
		reply := res.Text
		if res.Outcome != reports.OutcomeOK {
			reply = fmt.Sprintf("(no reply: %s)", res.Outcome)
		}
		// An explicit refusal is backpressure: like a well-behaved client, wait as long
		// as Retry-After asks (bounded) before the next turn.
		if res.Outcome == reports.OutcomeRejected && !sleepCtx(ctx, retryAfter(res.RetryAfter)) {
			break
		}
		tool := toolNames[(turn-1)%len(toolNames)]
		conv = append(conv, client.Message{Role: "assistant", Content: reply + fmt.Sprintf(" [call %s]", tool)})
		if !sleepCtx(ctx, a.Spec.ToolLatency.D()) {
			break
		}
		conv = append(conv, client.Message{Role: "user", Content: fmt.Sprintf("tool %s result: %s", tool,
			Text(rng, max(a.Spec.ToolResultBytes, 1)))})
		if !sleepCtx(ctx, a.Spec.ThinkTime.D()) {
			break
		}
	}
	return sent
}

func flatten(conv []client.Message) string {
	var b []byte
	for _, m := range conv {
		b = append(b, m.Role...)
		b = append(b, ": "...)
		b = append(b, m.Content...)
		b = append(b, '\n')
	}
	return string(b)
}

// Bounds of the back-off after a rejection (429/503).
var (
	DefaultRetryAfter = 500 * time.Millisecond // when the server gives no Retry-After
	MaxRetryAfter     = 5 * time.Second
)

// retryAfter parses a Retry-After header in seconds (an HTTP date or junk gives the
// default), capped at MaxRetryAfter.
func retryAfter(h string) time.Duration {
	d := DefaultRetryAfter
	if v, err := strconv.ParseFloat(strings.TrimSpace(h), 64); err == nil && v >= 0 {
		d = time.Duration(v * float64(time.Second))
	}
	return min(d, MaxRetryAfter)
}
