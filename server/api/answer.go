package api

import (
	"strings"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// Writer is where an Answer's output goes: the handler's HTTP response (openaiOut) or
// the simulator's in-memory client (pdsoak/sim). A driver whose client went away stops
// feeding the Answer; errors are the driver's (Answer.Started says which kind).
type Writer interface {
	// Begin is a stream's status and headers (200, text/event-stream), then first (the
	// chat role chunk; nil: none) as a data event.
	Begin(first any)
	// Data is one SSE data event: v's JSON, or [DONE] for nil.
	Data(v any)
	// Whole is a whole (not streamed) answer: 200 and v's JSON.
	Whole(v any)
}

// Answer is the API's answer to one generation as a state machine: the generator's
// events in (Event, then Finish), chunks and the status out (Writer). The stream's
// headers go out at its first event, not when the request is admitted.
type Answer struct {
	ck                         Chunks
	req                        *gen.Request
	chat, stream, includeUsage bool
	dec                        *kernels.StreamDecoder
	sm                         stopMatcher
	started                    bool
	count                      int
	buf                        strings.Builder // a whole answer's text
}

// Answer is the answer to p's generation, whose chunks are ck and whose tokens dec
// decodes.
func (p *Parsed) Answer(ck Chunks, dec *kernels.StreamDecoder) *Answer {
	a := &Answer{}
	a.reset(ck, &p.Request, p.Chat, p.Stream, p.IncludeUsage, p.Stop, dec)
	return a
}

func (a *Answer) reset(ck Chunks, req *gen.Request, chat, stream, includeUsage bool, stop []string, dec *kernels.StreamDecoder) {
	*a = Answer{ck: ck, req: req, chat: chat, stream: stream, includeUsage: includeUsage, dec: dec, sm: stopMatcher{stops: stop}}
}

// Started reports whether the stream's headers are out: an error then ends the stream
// with an SSE error event and no [DONE], before them it is an error status.
func (a *Answer) Started() bool { return a.started }

// Count is the number of tokens generated so far.
func (a *Answer) Count() int { return a.count }

// Event is one event of the generation (ev.Err nil): its text goes out (a stream's
// headers first). stopped: a stop string matched, the text ends before it; the driver
// cancels the generation, then calls Finish.
func (a *Answer) Event(w Writer, ev gen.Event) (stopped bool) {
	a.count += len(ev.Tokens)
	piece, matched := a.sm.push(Piece(a.dec, ev))
	if ev.Done && !matched {
		piece += a.sm.flush()
	}
	if !a.stream {
		a.buf.WriteString(piece)
		return matched
	}
	a.begin(w)
	if piece != "" {
		w.Data(a.ck.Content(piece))
	}
	return matched
}

func (a *Answer) begin(w Writer) {
	if a.started {
		return
	}
	a.started = true
	var role any
	if a.chat {
		role = a.ck.Role()
	}
	w.Begin(role)
}

// Finish ends the answer after the final event ev (or a stop string: stopped): the
// finish reason and usage (FinishOf) go out, then [DONE] for a stream.
func (a *Answer) Finish(w Writer, ev gen.Event, stopped bool) (reason string, u Usage) {
	if stopped {
		reason = "stop"
		u = Usage{PromptTokens: len(a.req.Prompt), CompletionTokens: a.count}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	} else {
		reason, u = FinishOf(ev, a.count, a.req)
	}
	if !a.stream {
		w.Whole(a.ck.Whole(a.buf.String(), reason, u))
		return reason, u
	}
	a.begin(w)
	w.Data(a.ck.Finish(reason))
	if a.includeUsage {
		w.Data(a.ck.Usage(u))
	}
	w.Data(nil)
	return reason, u
}
