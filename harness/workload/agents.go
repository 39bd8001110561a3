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
	sessions := a.Sessions()
	counts := make([]int, len(sessions))
	var wg sync.WaitGroup
	for i, ss := range sessions {
		wg.Go(func() { counts[i] = drive(wctx, ss, s) })
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	return Stats{Requests: total}
}

// drive runs one session (Session) on this goroutine until it ends or its window (ctx)
// does, and returns the requests it sent. A request that hangs blocks the session until
// its deadline: the next turn is only sent once the previous one resolved.
func drive(ctx context.Context, ss *Session, s Sender) int {
	sent := 0
	var res *client.Result
	for st := ss.Start(); ; st = ss.Result(time.Now(), res, ctx.Err() != nil) {
		if !SleepCtx(ctx, st.Wait) {
			ss.Stop(time.Now())
			return sent
		}
		if st.End {
			return sent
		}
		res = s.Send(ctx, ss.Req(time.Now()))
		sent++
	}
}

// NewSession returns the generator a session draws from and its system prompt.
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
