package api

import (
	"strings"

	"pdsoak/kernels"
	"pdsoak/server/gen"
)

// Out is what an Answer writes for one step, in this order. Its driver writes it: the
// handler on its http.ResponseWriter (openaiOut), the simulator into its in-memory
// client (pdsoak/sim). Returned as a value, not through an interface, so that the
// handler's writer stays on its stack.
type Out struct {
	// Begin is a stream's status and headers (200, text/event-stream), then Role (the
	// chat role chunk; nil: none) as a data event.
	Begin bool
	Role  any
	// Data are data events (nil: none), then Done is data: [DONE].
	Data [2]any
	Done bool
	// Whole is a whole (not streamed) answer: 200 and its JSON (nil: none).
	Whole any
}

// Answer is the API's answer to one generation as a state machine: the generator's
// events in (Event, then Finish), chunks and the status out (Out). The stream's
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
func (a *Answer) Event(ev gen.Event) (o Out, stopped bool) {
	a.count += len(ev.Tokens)
	piece, matched := a.sm.push(Piece(a.dec, ev))
	if ev.Done && !matched {
		piece += a.sm.flush()
	}
	if !a.stream {
		a.buf.WriteString(piece)
		return o, matched
	}
	a.begin(&o)
	if piece != "" {
		o.Data[0] = a.ck.Content(piece)
	}
	return o, matched
}

func (a *Answer) begin(o *Out) {
	if a.started {
		return
	}
	a.started, o.Begin = true, true
	if a.chat {
		o.Role = a.ck.Role()
	}
}

// Finish ends the answer after the final event ev (or a stop string: stopped): the
// finish reason and usage (FinishOf) go out, then [DONE] for a stream.
func (a *Answer) Finish(ev gen.Event, stopped bool) (o Out, reason string, u Usage) {
	if stopped {
		reason = "stop"
		u = Usage{PromptTokens: len(a.req.Prompt), CompletionTokens: a.count}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	} else {
		reason, u = FinishOf(ev, a.count, a.req)
	}
	if !a.stream {
		o.Whole = a.ck.Whole(a.buf.String(), reason, u)
		return o, reason, u
	}
	a.begin(&o)
	o.Data[0] = a.ck.Finish(reason)
	if a.includeUsage {
		o.Data[1] = a.ck.Usage(u)
	}
	o.Done = true
	return o, reason, u
}
