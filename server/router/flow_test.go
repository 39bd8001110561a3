package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// scriptIO is a hand-written FlowIO: workers as WorkerStates (prefill-0, prefill-1,
// decode-0, decode-1 unless told), tie breaks always the first candidate, and every
// call the Flow makes written down in order.
type scriptIO struct {
	*Pool
	ws      []*WorkerState
	calls   []string
	legs    []Legs
	final   *gen.Event
	tokens  []int
	forward error // what Forward returns
}

func newScriptIO(np, nd int) *scriptIO {
	io := &scriptIO{}
	for i := range np + nd {
		role, n := "prefill", i
		if i >= np {
			role, n = "decode", i-np
		}
		w := NewWorkerState(role, fmt.Sprintf("%s-%d", role, n), "boot")
		w.Checked(true, 1, "")
		io.ws = append(io.ws, w)
	}
	io.Pool = NewPool(io.ws, np, NewRNG(1))
	return io
}

func (s *scriptIO) note(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

func (s *scriptIO) Now() time.Time   { return time.Unix(0, 0) }
func (s *scriptIO) Intn(int) int     { return 0 } // the first candidate
func (s *scriptIO) Uint64() uint64   { return 42 }
func (s *scriptIO) Hold(p, d int)    { s.Pool.Hold(p, d); s.note("hold %d %d", p, d) }
func (s *scriptIO) Release(p, d int) { s.Pool.Release(p, d); s.note("release %d %d", p, d) }
func (s *scriptIO) StartLegs(l Legs) error {
	s.legs = append(s.legs, l)
	s.note("legs %d p=%d d=%d skip=%v", l.Attempt, l.Prefill, l.Decode, l.SkipPrefill)
	return nil
}
func (s *scriptIO) CancelLegs() { s.note("cancel") }
func (s *scriptIO) Forward(t []int) error {
	if s.forward != nil {
		return s.forward
	}
	s.tokens = append(s.tokens, t...)
	s.note("forward %v", t)
	return nil
}
func (s *scriptIO) Final(ev gen.Event) {
	if s.final != nil {
		panic("two final events")
	}
	s.final = &ev
	s.note("final")
}
func (s *scriptIO) Grace(d time.Duration)     { s.note("grace %v", d) }
func (s *scriptIO) MarkDown(w int, err error) { s.ws[w].MarkDown(1, err); s.note("markdown %d", w) }
func (s *scriptIO) Done()                     { s.note("done") }

func (s *scriptIO) script() string { return strings.Join(s.calls, "; ") }

func startFlow(t *testing.T, io *scriptIO, cfg FlowConfig) *Flow {
	t.Helper()
	f := NewFlow(io, &cfg, &gen.Request{ID: "r", Prompt: []int{1, 2}, MaxTokens: 2}, nil)
	f.Start()
	return f
}

var cfg2 = FlowConfig{MaxRetries: 2, AbortOnUnhealthy: true, PrefillGrace: time.Second}

// TestFlowSuccess: tokens are forwarded; with the prefill leg over, decode's done
// closes the attempt and then hands the final event over.
func TestFlowSuccess(t *testing.T) {
	io := newScriptIO(1, 1)
	f := startFlow(t, io, cfg2)
	f.PrefillEnded(0, nil, false)
	f.Decode(0, gen.Event{Tokens: []int{7}})
	f.Decode(0, gen.Event{Tokens: []int{8}, Done: true, Finish: "stop"})
	assert.Equal(t, "hold 0 1; legs 0 p=0 d=1 skip=false; forward [7]; cancel; release 0 1; done; final", io.script())
	assert.Equal(t, []int{8}, io.final.Tokens, "the done chunk's tokens ride on the final event")
	assert.True(t, f.Over())
	assert.Zero(t, io.ws[0].Outstanding()+io.ws[1].Outstanding())
	info := f.Info(time.Unix(0, 0), func(i int) string { return io.ws[i].Name() })
	assert.Equal(t, gen.RequestInfo{ID: "r", Stage: "streaming", PromptTokens: 2, OutputTokens: 1, Room: info.Room,
		Prefill: "prefill-0", Decode: "decode-0"}, info)
	require.NotNil(t, info.Room)
}

// TestFlowPrefillGrace: decode's done before the prefill leg ended goes to the client at
// once; the attempt closes when the prefill leg ends or the grace runs out, and the
// request's end in between changes nothing.
func TestFlowPrefillGrace(t *testing.T) {
	for _, end := range []string{"prefill ends", "grace over"} {
		t.Run(end, func(t *testing.T) {
			io := newScriptIO(1, 1)
			f := startFlow(t, io, cfg2)
			f.Decode(0, gen.Event{Done: true, Finish: "length"})
			f.ContextEnded(context.Canceled) // the client left satisfied
			p, d, wp, wd := f.Watching()
			assert.False(t, wp || wd, "health no longer matters (%d, %d)", p, d)
			if end == "prefill ends" {
				f.PrefillEnded(0, errors.New("late"), true)
			} else {
				f.GraceOver()
			}
			want := "hold 0 1; legs 0 p=0 d=1 skip=false; final; grace 1s; "
			if end == "prefill ends" {
				want += "grace 0s; "
			}
			assert.Equal(t, want+"cancel; release 0 1; done", io.script())
			assert.NoError(t, io.final.Err)
			assert.True(t, io.ws[0].Healthy(), "a prefill ending after the answer is never marked down")
		})
	}
}

// TestFlowRetries: a transport failure before any token marks the worker down and
// retries on another pair without it; a failure after a token ends the request.
func TestFlowRetries(t *testing.T) {
	io := newScriptIO(2, 2)
	f := startFlow(t, io, cfg2)
	f.DecodeFailed(0, errors.New("reset"), true)
	assert.Equal(t, "hold 0 2; legs 0 p=0 d=2 skip=false; cancel; release 0 2; markdown 2; hold 0 3; legs 1 p=0 d=3 skip=false",
		io.script())
	f.Decode(0, gen.Event{Tokens: []int{1}}) // the first attempt's late chunk
	f.Decode(1, gen.Event{Tokens: []int{5}})
	f.DecodeFailed(1, fmt.Errorf("%w: gone", gen.ErrUnavailable), false)
	assert.Equal(t, []int{5}, io.tokens)
	require.NotNil(t, io.final)
	assert.ErrorIs(t, io.final.Err, gen.ErrUnavailable, "no retry once tokens were sent")
	assert.True(t, f.Over())
}

// TestFlowPrefillFailure: a prefill failure before decode has its KV fails the attempt
// (or, under sglang#9726, leaves decode waiting); after the first token it is ignored.
func TestFlowPrefillFailure(t *testing.T) {
	io := newScriptIO(1, 1)
	f := startFlow(t, io, FlowConfig{MaxRetries: 0, AbortOnUnhealthy: true})
	f.PrefillEnded(0, fmt.Errorf("%w: kv", gen.ErrTransfer), false)
	assert.ErrorIs(t, io.final.Err, gen.ErrTransfer)
	assert.Contains(t, io.script(), "cancel; release 0 1; done; final")

	io = newScriptIO(1, 1)
	f = startFlow(t, io, cfg2)
	f.Decode(0, gen.Event{Tokens: []int{1}})
	f.PrefillEnded(0, errors.New("late"), true)
	f.WorkerDown(0)
	assert.Nil(t, io.final, "after the first token prefill no longer matters")
	assert.True(t, io.ws[0].Healthy())

	io = newScriptIO(1, 1)
	f = startFlow(t, io, FlowConfig{Bugs: scheduler.BugSet{scheduler.BugPrefillFailNoDecodeAbort}})
	f.PrefillEnded(0, errors.New("boom"), false)
	assert.Nil(t, io.final, "sglang#9726: the decode leg is left waiting")
	_, decodeOpen := f.Open()
	assert.True(t, decodeOpen)
}

// TestFlowUnhealthyAndDeadline: a watched worker going down fails the attempt (a
// transport failure, retried); the deadline ends the request as a total timeout without
// marking anyone down.
func TestFlowUnhealthyAndDeadline(t *testing.T) {
	io := newScriptIO(2, 1)
	f := startFlow(t, io, cfg2)
	f.WorkerDown(1) // prefill-1: not this attempt's
	assert.Len(t, io.legs, 1)
	io.ws[0].MarkDown(1, errors.New("frozen"))
	f.WorkerDown(0)
	require.Len(t, io.legs, 2)
	assert.Equal(t, 1, io.legs[1].Prefill, "retried on the other prefill")
	f.ContextEnded(context.DeadlineExceeded)
	var se *gen.StageError
	require.ErrorAs(t, io.final.Err, &se)
	assert.Equal(t, "total", se.Stage)
	assert.ErrorIs(t, io.final.Err, gen.ErrTimeout)
	assert.True(t, io.ws[1].Healthy() && io.ws[2].Healthy())
}

// TestFlowDecodeOnly: with no prefill to take it, --pd-fallback decode-only sends the
// decode leg alone without a room; sglang#31206 sends it alone with the pair's room.
func TestFlowDecodeOnly(t *testing.T) {
	io := newScriptIO(1, 1)
	io.ws[0].MarkDown(1, errors.New("dead"))
	f := startFlow(t, io, FlowConfig{Fallback: FallbackDecodeOnly})
	assert.Equal(t, "hold -1 1; legs 0 p=-1 d=1 skip=false", io.script())
	f.Decode(0, gen.Event{Done: true})
	info := f.Info(time.Unix(0, 0), func(i int) string { return io.ws[i].Name() })
	assert.Equal(t, "decode-only", info.Stage)
	assert.Nil(t, info.Room)
	assert.Equal(t, "", info.Prefill)
	assert.True(t, f.Over())

	io = newScriptIO(1, 1)
	io.ws[0].MarkDown(1, errors.New("dead"))
	startFlow(t, io, FlowConfig{Bugs: scheduler.BugSet{scheduler.BugDecodeOnlyWhenPrefillDown}})
	assert.Equal(t, "hold 0 1; legs 0 p=0 d=1 skip=true", io.script())
}

// TestFlowClientGone: the client leaving ends the request as aborted; a failed write to
// the client is the same.
func TestFlowClientGone(t *testing.T) {
	io := newScriptIO(1, 1)
	io.forward = context.Canceled
	startFlow(t, io, cfg2).Decode(0, gen.Event{Tokens: []int{1}})
	assert.ErrorIs(t, io.final.Err, gen.ErrAborted)
	assert.NotContains(t, io.script(), "markdown")
}
