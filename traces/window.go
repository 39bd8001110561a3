package traces

import (
	"math"
	"math/rand/v2"
	"time"
)

// Window selects and rescales part of a trace for replay. The zero value replays the
// whole trace at its own pace and lengths.
type Window struct {
	// Start skips requests that arrive before it; the replay starts at Start.
	Start time.Duration
	// Limit keeps at most this many requests (0: all).
	Limit int
	// Speedup divides every arrival time (2: twice as fast). 0 or 1: the trace's pace.
	Speedup float64
	// Rate rescales arrivals to this mean rate in requests per second (0: unset). It
	// applies after Start and Limit and replaces Speedup.
	Rate float64
	// Until drops requests that would arrive at or after it (0: no bound): the replay
	// window of the scenario.
	Until time.Duration
}

// Window returns the schedule w selects, arrivals counted from the window's start and
// sorted. It does not modify t.
func (t *Trace) Window(w Window) []Request {
	var out []Request
	for _, r := range t.Requests {
		if r.At < w.Start {
			continue
		}
		if w.Limit > 0 && len(out) >= w.Limit {
			break
		}
		r.At -= w.Start
		out = append(out, r)
	}
	scale := 1.0
	if w.Speedup > 0 {
		scale = 1 / w.Speedup
	}
	if w.Rate > 0 && len(out) > 1 {
		if span := out[len(out)-1].At - out[0].At; span > 0 {
			// n-1 gaps over the new span make the mean rate Rate.
			want := float64(len(out)-1) / w.Rate * float64(time.Second)
			scale = want / float64(span)
		}
	}
	if scale != 1 {
		for i := range out {
			// A slowed-down arrival past time.Duration's range saturates: converted, it
			// would wrap negative and land inside the window.
			if f := float64(out[i].At) * scale; f >= math.MaxInt64 {
				out[i].At = math.MaxInt64
			} else {
				out[i].At = time.Duration(f)
			}
		}
	}
	if w.Until > 0 {
		n := 0
		for n < len(out) && out[n].At < w.Until {
			n++
		}
		out = out[:n]
	}
	return out
}

// Scaled returns how many prompt tokens r gets when each 512-token block becomes
// blockTokens tokens (at least 1).
func Scaled(r Request, blockTokens int) int {
	if blockTokens <= 0 || blockTokens == BlockTokens {
		return max(r.Input, 1)
	}
	return max((r.Input*blockTokens+BlockTokens/2)/BlockTokens, 1)
}

// Prompt synthesizes r's prompt as text of Scaled(r, blockTokens) bytes (one token per
// byte on a byte-level tokenizer), block by block: block i is blockTokens bytes drawn
// from a generator keyed by (salt, block id), the last block only as long as the
// remainder. Equal ids give identical text, and a short block is a prefix of the full
// one, so two requests sharing their first k ids share their first k blocks of text.
func Prompt(r Request, blockTokens int, salt uint64) string {
	if blockTokens <= 0 {
		blockTokens = BlockTokens
	}
	n := Scaled(r, blockTokens)
	buf := make([]byte, 0, n)
	for i, id := range r.Blocks {
		if len(buf) >= n {
			break
		}
		size := min(blockTokens, n-len(buf))
		if i == len(r.Blocks)-1 {
			size = n - len(buf) // the last block carries any rounding remainder
		}
		buf = appendBlock(buf, rand.New(rand.NewPCG(salt, id)), size)
	}
	for len(buf) < n { // a request with fewer ids than its length needs
		buf = appendBlock(buf, rand.New(rand.NewPCG(salt, 1<<62|uint64(r.Line))), n-len(buf))
	}
	return string(buf)
}

const letters = "etaoinshrdlucmfwypvbgkqjxz"

// appendBlock appends size bytes of lowercase words separated by spaces.
func appendBlock(buf []byte, rng *rand.Rand, size int) []byte {
	for k := 0; k < size; k++ {
		if k%6 == 5 {
			buf = append(buf, ' ')
			continue
		}
		buf = append(buf, letters[rng.IntN(len(letters))])
	}
	return buf
}

// Reuse is the share of prompt tokens a prefix cache of unbounded size would serve:
// each request's longest run of leading blocks whose whole chain of ids appeared before
// (as a radix tree over blocks matches), counted in tokens. It is the trace's own reuse,
// the ceiling a reference server's cache hit rate is compared with.
func Reuse(reqs []Request) (hit, total int) {
	type key struct {
		parent uint64
		id     uint64
	}
	seen := map[key]uint64{}
	next := uint64(1)
	for _, r := range reqs {
		node := uint64(0)
		matched := true
		for i, id := range r.Blocks {
			size := BlockTokens
			if i == len(r.Blocks)-1 {
				size = r.Input - i*BlockTokens
			}
			size = max(min(size, BlockTokens), 0)
			total += size
			k := key{node, id}
			child, ok := seen[k]
			if ok && matched {
				hit += size
			} else {
				matched = false
			}
			if !ok {
				child = next
				next++
				seen[k] = child
			}
			node = child
		}
	}
	return hit, total
}
