package engine

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

// drainStream reads what is buffered on s.ch without blocking.
func drainStream(s *stream) (toks []int, done bool) {
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return toks, true
			}
			toks = append(toks, ev.Tokens...)
		default:
			return toks, false
		}
	}
}

// TestStreamScripted drives push, flush, reads and end in fixed orders on one goroutine:
// the sender never blocks (the test would deadlock), the Done slot stays free, and the
// client sees every token once, in order.
func TestStreamScripted(t *testing.T) {
	tests := []struct {
		name   string
		script string // p: push one token, f: flush, r: read everything buffered, 1: read one event
	}{
		{"never reads", "pppppppppppppppppppp"},
		{"reads each", "prprprprpr"},
		{"fills then reads", "pppppppppppr" + "pppf" + "pppppppppppr"},
		{"reads one at a time while behind", "pppppppppppp1p1p1f1pp1"},
		{"flush without room", "ppppppppppffff"},
		{"flush after room", "pppppppppp1f1f1f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &stream{ch: make(chan gen.Event, streamBuffer)}
			var want, got []int
			next := 0
			for _, op := range tc.script {
				switch op {
				case 'p':
					want = append(want, next)
					s.push([]int{next})
					next++
				case 'f':
					s.flush()
				case 'r':
					toks, _ := drainStream(s)
					got = append(got, toks...)
				case '1':
					select {
					case ev := <-s.ch:
						got = append(got, ev.Tokens...)
					default:
					}
				}
				if len(s.ch) > cap(s.ch)-1 {
					t.Fatalf("after %q the Done slot is taken: %d buffered", op, len(s.ch))
				}
			}
			s.end(gen.Event{Done: true, Tokens: []int{next}})
			want = append(want, next)
			toks, closed := drainStream(s)
			got = append(got, toks...)
			if !closed || !slices.Equal(got, want) {
				t.Fatalf("closed=%v got %v, want %v", closed, got, want)
			}
		})
	}
}

// TestStreamOrderConcurrentReader: a client reading while the loop pushes (the race the
// old take-back-and-merge send lost: a read between two of its receives reordered
// tokens) gets every token in order.
func TestStreamOrderConcurrentReader(t *testing.T) {
	const n = 20000
	s := &stream{ch: make(chan gen.Event, streamBuffer)}
	got := make(chan []int, 1)
	go func() {
		var toks []int
		for ev := range s.ch {
			toks = append(toks, ev.Tokens...)
			runtime.Gosched()
		}
		got <- toks
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		s.push([]int{i})
		if rng.IntN(4) == 0 {
			s.flush()
		}
		if rng.IntN(8) == 0 {
			runtime.Gosched()
		}
	}
	s.end(gen.Event{Done: true})
	toks := <-got
	if len(toks) != n {
		t.Fatalf("got %d tokens, want %d", len(toks), n)
	}
	for i, v := range toks {
		if v != i {
			t.Fatalf("token %d is %d: reordered", i, v)
		}
	}
}

// TestLastTokensRideOnDone: the tokens of a request's last step come in its Done event,
// not in an event of their own.
func TestLastTokensRideOnDone(t *testing.T) {
	e := startEngine(t, newFakeBackend(64, 4), DefaultConfig())
	r := generate(t, e, &gen.Request{ID: "d", Prompt: []int{0, 5}, MaxTokens: 4, IgnoreEOS: true})
	require.NoError(t, r.done.Err)
	require.Len(t, r.tokens, 4)
	require.NotEmpty(t, r.done.Tokens, "the last token is in the Done event")
	require.Equal(t, 4, r.events, "one event per step, the last one being Done")
}
