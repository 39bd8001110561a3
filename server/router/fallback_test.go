package router

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

func TestPickRoute(t *testing.T) {
	up := func(n int64) Candidate { return Candidate{Healthy: true, HasBootstrap: true, Outstanding: n} }
	down := Candidate{HasBootstrap: true}
	gone := Candidate{Healthy: true, HasBootstrap: true, Excluded: true}
	last := func(n int) int { return n - 1 }
	for _, tc := range []struct {
		name       string
		p, d       []Candidate
		fb         Fallback
		want       Route
		wantErr    bool
		hasRouteOK bool
	}{
		{"a pair wins over the fallback", []Candidate{up(0)}, []Candidate{up(1), up(0)}, FallbackDecodeOnly, Route{Pair: Pair{0, 1}}, false, true},
		{"no fallback: no prefill, no route", []Candidate{down}, []Candidate{up(0)}, FallbackNone, Route{Pair: Pair{-1, -1}}, true, false},
		{"decode-only when every prefill is down", []Candidate{down, down}, []Candidate{up(3), up(1)}, FallbackDecodeOnly,
			Route{Pair: Pair{-1, 1}, DecodeOnly: true}, false, true},
		{"decode-only when the prefill failed this request", []Candidate{gone}, []Candidate{up(0)}, FallbackDecodeOnly,
			Route{Pair: Pair{-1, 0}, DecodeOnly: true}, false, true},
		{"decode ties drawn as PickPair draws them", []Candidate{down}, []Candidate{up(2), up(2)}, FallbackDecodeOnly,
			Route{Pair: Pair{-1, 1}, DecodeOnly: true}, false, true},
		{"no decode: nothing to fall back to", []Candidate{down}, []Candidate{down}, FallbackDecodeOnly, Route{Pair: Pair{-1, -1}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PickRoute(tc.p, tc.d, nil, tc.fb, last, func() string { return "why" })
			assert.Equal(t, tc.want, got)
			if tc.wantErr {
				require.ErrorIs(t, err, gen.ErrUnavailable)
			} else {
				require.NoError(t, err)
			}
			// Excluded candidates are per request; HasRoute looks at health alone.
			healthOnly := func(cs []Candidate) []Candidate {
				out := append([]Candidate(nil), cs...)
				for i := range out {
					out[i].Excluded = false
				}
				return out
			}
			if tc.name != "decode-only when the prefill failed this request" {
				assert.Equal(t, tc.hasRouteOK, HasRoute(healthOnly(tc.p), tc.d, nil, tc.fb))
			}
		})
	}
}

func TestParseFallback(t *testing.T) {
	for in, want := range map[string]Fallback{"": FallbackNone, "none": FallbackNone, " decode-only ": FallbackDecodeOnly} {
		got, err := ParseFallback(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := ParseFallback("decode_only")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"decode_only" is unknown`)
}

func FuzzParseFallback(f *testing.F) {
	for _, s := range []string{"", "none", "decode-only", "DECODE-ONLY", "decode-only\x00", " none"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fb, err := ParseFallback(s)
		if err != nil {
			assert.Empty(t, fb)
			return
		}
		assert.Contains(t, Fallbacks, fb)
	})
}

// decodeUnlessPaired answers a decode-only request (no bootstrap room) at once and holds
// a paired one until the router cancels it, as a real decode waits for its KV.
func decodeUnlessPaired(w http.ResponseWriter, r *http.Request, wr gen.WorkerRequest) {
	if wr.BootstrapRoom != nil {
		blockUntilCancel(w, r, wr)
		return
	}
	decodeOK(w, r, wr)
}

// With the prefill worker gone, --pd-fallback decode-only serves the request on decode
// alone (the body carries no bootstrap room) and the client sees a complete answer;
// without it the same request is refused explicitly.
func TestDecodeOnlyFallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		fb   Fallback
	}{{"knob on", FallbackDecodeOnly}, {"knob off", FallbackNone}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "127.0.0.1:9001", prefillOK)
			d := newFake(t, "", decodeUnlessPaired)
			r := newRouter(t, []*fakeWorker{p}, []*fakeWorker{d}, WithPDFallback(tc.fb))
			require.NoError(t, r.Healthy())
			p.srv.Close() // the prefill process dies: connections are refused from now on

			ch, err := r.Generate(context.Background(), req("r1"))
			require.NoError(t, err, "the router still thinks the prefill is healthy: it accepts")
			tokens, final := collect(t, ch)
			if tc.fb == FallbackNone {
				require.ErrorIs(t, final.Err, gen.ErrUnavailable, "an explicit error, never a silent fallback")
				assert.Empty(t, tokens)
				// Marked down after the refused connection: later requests are refused at once.
				_, err := r.Generate(context.Background(), req("r2"))
				require.ErrorIs(t, err, gen.ErrUnavailable)
				return
			}
			require.NoError(t, final.Err)
			assert.Equal(t, []int{7, 8, 9}, tokens)
			// The paired attempt's decode leg may be recorded after the decode-only one (its
			// handler can start late on a loaded machine): find the latter by its flag.
			only := decodeOnlyBodies(d.requests())
			require.Len(t, only, 1, "one decode-only body: %+v", d.requests())
			assert.Nil(t, only[0].BootstrapRoom, "a decode-only body has no bootstrap room")
			assert.Empty(t, only[0].BootstrapAddr)
			require.NoError(t, r.Healthy(), "a healthy decode alone is a route under decode-only")

			// Later requests go decode-only at once (the prefill is marked down).
			ch, err = r.Generate(context.Background(), req("r2"))
			require.NoError(t, err)
			_, final = collect(t, ch)
			require.NoError(t, final.Err)
			var r2 []gen.WorkerRequest
			for _, wr := range d.requests() {
				if wr.RID == "r2" {
					r2 = append(r2, wr)
				}
			}
			require.Len(t, r2, 1, "r2 went to decode once")
			assert.True(t, r2[0].DecodeOnly)
			assert.Nil(t, r2[0].BootstrapRoom)
		})
	}
}

// decodeOnlyBodies are the decode-only /generate bodies among reqs (decode_only set).
func decodeOnlyBodies(reqs []gen.WorkerRequest) []gen.WorkerRequest {
	var out []gen.WorkerRequest
	for _, wr := range reqs {
		if wr.DecodeOnly {
			out = append(out, wr)
		}
	}
	return out
}
