package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"pdsoak/harness/client"
	"pdsoak/ledger"
)

// Agents runs N sessions in parallel, each a sequence of turns over a growing
// conversation, like the multi-agent tool of the incident.
type Agents struct {
	Common
	// budget paces the re-sends of refused turns of all sessions (see RetryBudget).
	budget *rate.Limiter
}

// toolNames alternate: each turn the agent "writes" then, next turn, "saves".
var toolNames = [...]string{"write", "save"}

// Run implements Workload.
func (a *Agents) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, until := a.window(start)
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if !SleepCtx(wctx, time.Until(from)) {
		return Stats{}
	}
	n := max(a.Spec.Agents, 1)
	if a.budget == nil {
		a.budget = RetryBudget(max(a.Shard.size(n), 1))
	}
	counts := make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if !a.Shard.owns(uint64(i)) {
			continue // another shard's session
		}
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

// session runs one agent's conversations: one, or (restart) a fresh one each time the
// previous reached its turn limit, until the window ends. A request that hangs blocks
// the session until its deadline: the next turn is only sent once the previous one
// resolved.
func (a *Agents) session(ctx context.Context, session int, s Sender) int {
	rng, system := a.NewSession(session)
	sent := 0
	for round := 1; ; round++ {
		n, more := a.conversation(ctx, rng, system, session, round, s)
		sent += n
		if !more || !a.Spec.Restart || a.Spec.Turns == 0 || ctx.Err() != nil {
			return sent
		}
	}
}

// conversation runs one conversation of a session (round is 1-based) and returns the
// requests it sent and whether it ended by reaching its turn limit (false: the window
// or ctx ended it). Round 1 draws from rng exactly as a session without restart does,
// so its request ids and bodies do not depend on restart.
func (a *Agents) conversation(ctx context.Context, rng *rand.Rand, system string, session, round int, s Sender) (int, bool) {
	prefix, conv := a.NewConversation(rng, system, session, round)
	sent := 0
	for turn := 1; a.Spec.Turns == 0 || turn <= a.Spec.Turns; turn++ {
		if ctx.Err() != nil {
			return sent, false
		}
		id := TurnID(prefix, turn)
		res := s.Send(ctx, a.Turn(id, session, turn, conv))
		sent++
		res, n, ok := a.retry(ctx, res, id, session, turn, conv, s)
		sent += n
		if !ok {
			return sent, false
		}
		res, n, ok = a.reconnect(ctx, res, id, session, turn, conv, s)
		sent += n
		if !ok {
			return sent, false
		}
		conv = Reply(conv, res, turn)
		if !SleepCtx(ctx, a.Spec.ToolLatency.D()) {
			return sent, false
		}
		conv = a.ToolResult(rng, conv, turn)
		if !SleepCtx(ctx, a.Spec.ThinkTime.D()) {
			return sent, false
		}
	}
	return sent, true
}

// retry handles a refused turn. An explicit refusal is backpressure: like a
// well-behaved client, it waits as long as Retry-After asks (bounded) and as long as the
// workload's retry budget needs, then re-sends the same turn, up to Retries times, each
// attempt under its own id so every request keeps exactly one outcome. It returns the
// turn's last result, the re-sends it made, and false when ctx ended the session.
func (a *Agents) retry(ctx context.Context, res *client.Result, id string, session, turn int, conv []client.Message, s Sender) (*client.Result, int, bool) {
	sent := 0
	for attempt := 1; ; attempt++ {
		if res.Outcome == ledger.OutcomeCancelled && ctx.Err() != nil {
			return res, sent, false
		}
		if res.Outcome != ledger.OutcomeRejected {
			return res, sent, true
		}
		wait := RetryAfter(res.RetryAfter)
		if attempt > a.Spec.Retries {
			// No retry left: still honour Retry-After before the next turn.
			return res, sent, SleepCtx(ctx, wait)
		}
		r := a.budget.Reserve()
		if r.Delay() > MaxRetryBudgetWait {
			// The budget is spent for longer than a retry may wait: give up on this
			// turn rather than join a retry storm.
			r.Cancel()
			return res, sent, SleepCtx(ctx, wait)
		}
		wait = max(wait, r.Delay())
		if !SleepCtx(ctx, wait) {
			r.Cancel()
			return res, sent, false
		}
		res = s.Send(ctx, a.Turn(RetryID(id, attempt), session, turn, conv))
		sent++
	}
}

// NewSession returns the generator a session draws from and its system prompt. The
// simulator builds its sessions with these functions, so its requests are the real ones.
func (a *Agents) NewSession(session int) (*rand.Rand, string) {
	rng := a.rng(uint64(session))
	return rng, fmt.Sprintf("You are agent %d. ", session) + Text(rng, max(a.Spec.PromptTokens, 1))
}

// NewConversation starts conversation round (1-based) of a session: the prefix of its
// request ids and its first messages.
func (a *Agents) NewConversation(rng *rand.Rand, system string, session, round int) (string, []client.Message) {
	task := fmt.Sprintf("Task %d: %s", session, Text(rng, 48))
	prefix := fmt.Sprintf("%s-s%03d", a.Spec.Name, session)
	if round > 1 {
		task = fmt.Sprintf("Task %d.%d: %s", session, round, Text(rng, 48))
		prefix += fmt.Sprintf("-c%03d", round)
	}
	return prefix, []client.Message{{Role: "system", Content: system}, {Role: "user", Content: task}}
}

// TurnID is the request id of a conversation's turn; RetryID that of its attempt-th re-send.
func TurnID(prefix string, turn int) string { return fmt.Sprintf("%s-t%03d", prefix, turn) }

// RetryID is the request id of the attempt-th re-send of the turn with id.
func RetryID(id string, attempt int) string { return fmt.Sprintf("%s-r%d", id, attempt) }

// Reply appends a turn's answer (or what stood in for it) and the tool call it makes.
func Reply(conv []client.Message, res *client.Result, turn int) []client.Message {
	reply := res.Text
	if res.Outcome != ledger.OutcomeOK {
		reply = fmt.Sprintf("(no reply: %s)", res.Outcome)
	}
	tool := toolNames[(turn-1)%len(toolNames)]
	return append(conv, client.Message{Role: "assistant", Content: reply + fmt.Sprintf(" [call %s]", tool)})
}

// ToolResult appends the result of the tool a turn called.
func (a *Agents) ToolResult(rng *rand.Rand, conv []client.Message, turn int) []client.Message {
	tool := toolNames[(turn-1)%len(toolNames)]
	return append(conv, client.Message{Role: "user", Content: fmt.Sprintf("tool %s result: %s", tool,
		Text(rng, max(a.Spec.ToolResultBytes, 1)))})
}

// Turn builds the request for one turn over the conversation so far (scheduled now).
// Once sent, the request runs to its own deadline (the Sender bounds it, not the
// workload window); the runner's drain waits for it.
func (a *Agents) Turn(id string, session, turn int, conv []client.Message) *Req {
	req := &Req{Request: a.base(id, time.Now()), Workload: a.Spec.Name, Session: session, Turn: turn}
	req.Messages = append([]client.Message(nil), conv...)
	if a.Spec.Endpoint == "completions" {
		req.Prompt = flatten(conv)
		req.Messages = nil
	}
	for _, m := range conv {
		req.PromptBytes += len(m.Content)
	}
	return req
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
const (
	DefaultRetryAfter = 500 * time.Millisecond // when the server gives no Retry-After
	MaxRetryAfter     = 5 * time.Second
)

// The retry budget of an agents workload. The re-sends of refused turns of all its
// sessions draw from one token bucket (golang.org/x/time/rate) that holds one retry per
// agent and refills at RetryBudgetPerAgent retries per second per agent: a fleet of
// agents refused with "Retry-After: 0" retries at a bounded rate instead of as fast as
// the server refuses. A retry that would wait longer than MaxRetryBudgetWait for the
// budget is not made (the turn stays rejected).
const (
	RetryBudgetPerAgent rate.Limit = 1
	MaxRetryBudgetWait             = 5 * time.Second
)

// RetryBudget returns the default retry budget of an agents workload of n agents.
func RetryBudget(n int) *rate.Limiter {
	n = max(n, 1)
	return rate.NewLimiter(RetryBudgetPerAgent*rate.Limit(n), n)
}

// RetryAfter parses a Retry-After header in seconds (an HTTP date or junk gives the
// default), capped at MaxRetryAfter.
func RetryAfter(h string) time.Duration {
	d := DefaultRetryAfter
	if v, err := strconv.ParseFloat(strings.TrimSpace(h), 64); err == nil && v >= 0 {
		d = time.Duration(v * float64(time.Second))
	}
	return min(d, MaxRetryAfter)
}
