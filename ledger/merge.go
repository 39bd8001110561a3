package ledger

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// MergeResult says what Merge made of its inputs. Problems are the reasons the merged
// run cannot be trusted (a shard missing, torn or incomplete, mismatched inputs); Merge
// also writes them into the merged run_end's Error, so reports makes the run invalid.
type MergeResult struct {
	Shard    Shard
	Events   int // lines written
	Problems []string
}

// mergeHead is the part of a line the merge needs: ordering, the run events it
// replaces, faults (carried from shard 1 only) and request counting.
type mergeHead struct {
	Time        time.Time `json:"time"`
	Type        EventType `json:"type"`
	Scenario    string    `json:"scenario"`
	Seed        int64     `json:"seed"`
	Error       string    `json:"error"`
	Interrupted string    `json:"interrupted"`
	Shard       *Shard    `json:"shard"`
}

type mergeInput struct {
	path  string
	r     *bufio.Reader
	f     *os.File
	line  []byte
	head  mergeHead
	start *Event // the shard's run_start
	shard Shard
	ended bool
	torn  bool
	bad   error
	part  ShardPart
	n     int // lines read
}

// next reads the next non-blank line; false at the end or on a bad line (in.bad).
func (in *mergeInput) next() bool {
	for {
		line, err := in.r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			in.bad = err
			return false
		}
		eof := err != nil
		if eof && len(bytes.TrimSpace(line)) > 0 {
			in.torn = true // no newline: the writer was interrupted mid-line
			return false
		}
		if eof {
			return false
		}
		in.n++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		in.head = mergeHead{}
		if err := json.Unmarshal(line, &in.head); err != nil {
			in.bad = fmt.Errorf("line %d: %w", in.n, err)
			return false
		}
		in.line = line
		return true
	}
}

// missingShards lists the indices in 1..count that seen lacks, runs of them as "a-b":
// its size follows the shards given, not count, which a ledger may claim to be anything.
func missingShards(seen map[int]string, count int) []string {
	var have []int
	for i := range seen {
		if i >= 1 && i <= count {
			have = append(have, i)
		}
	}
	sort.Ints(have)
	var out []string
	span := func(a, b int) {
		switch {
		case a == b:
			out = append(out, fmt.Sprint(a))
		case a < b:
			out = append(out, fmt.Sprintf("%d-%d", a, b))
		}
	}
	next := 1
	for _, i := range have {
		span(next, i-1)
		next = i + 1
	}
	span(next, count)
	return out
}

type mergeHeap []*mergeInput

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	if !h[i].head.Time.Equal(h[j].head.Time) {
		return h[i].head.Time.Before(h[j].head.Time)
	}
	return h[i].shard.Index < h[j].shard.Index
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*mergeInput)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Merge merges the ledgers of the shards of one run into w: one run_start (shard 1's,
// with Shard listing every part), every shard's events ordered by time (a k-way merge:
// memory is one line per shard, whatever the ledgers' size), fault events from shard
// 1 only (the only shard that applies faults), and one run_end. Anything that makes
// the merge unfaithful is a problem, recorded in run_end.Error, as are the caller's
// own problems (e.g. shards whose scenario files differ).
func Merge(paths []string, w io.Writer, problems ...string) (MergeResult, error) {
	res := MergeResult{Problems: append([]string(nil), problems...)}
	problem := func(format string, args ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, args...)) }
	if len(paths) == 0 {
		return res, errors.New("ledger: merge: no input ledgers")
	}
	ins := make([]*mergeInput, 0, len(paths))
	defer func() {
		for _, in := range ins {
			in.f.Close()
		}
	}()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return res, fmt.Errorf("ledger: merge: %w", err)
		}
		in := &mergeInput{path: p, f: f, r: bufio.NewReaderSize(f, 1<<20)}
		ins = append(ins, in)
		if !in.next() || in.head.Type != EventRunStart {
			return res, fmt.Errorf("ledger: merge: %s: the first event is not run_start", p)
		}
		var ev Event
		if err := json.Unmarshal(in.line, &ev); err != nil {
			return res, fmt.Errorf("ledger: merge: %s: run_start: %w", p, err)
		}
		if ev.Shard == nil || ev.Shard.Index == 0 {
			return res, fmt.Errorf("ledger: merge: %s is not a shard's ledger (run with --shard i/n)", p)
		}
		in.start, in.shard = &ev, *ev.Shard
		in.part = ShardPart{Index: ev.Shard.Index, Skew: ev.Shard.Skew}
	}
	sort.SliceStable(ins, func(i, j int) bool { return ins[i].shard.Index < ins[j].shard.Index })

	// The inputs must be the shards of one run: same count, scenario and seed, each
	// index once.
	first := ins[0]
	count := first.shard.Count
	seen := map[int]string{}
	for _, in := range ins {
		s := in.start
		switch {
		case in.shard.Index < 1 || in.shard.Index > in.shard.Count:
			problem("%s: run_start shard %d/%d: the index is not within 1..count", in.path, in.shard.Index, in.shard.Count)
		case in.shard.Count != count:
			problem("%s is shard %d/%d, but %s is of %d shards", in.path, in.shard.Index, in.shard.Count, first.path, count)
		case s.Scenario != first.start.Scenario || s.Seed != first.start.Seed:
			problem("%s ran scenario %s seed %d, but %s ran %s seed %d", in.path, s.Scenario, s.Seed, first.path, first.start.Scenario, first.start.Seed)
		}
		if prev, dup := seen[in.shard.Index]; dup {
			problem("shard %d given twice (%s and %s)", in.shard.Index, prev, in.path)
		}
		seen[in.shard.Index] = in.path
	}
	if missing := missingShards(seen, count); len(missing) > 0 {
		problem("shard %s of %d missing", strings.Join(missing, ", "), count)
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	enc := func(ev *Event) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		bw.Write(b)
		res.Events++
		return bw.WriteByte('\n')
	}
	start := *first.start
	for _, in := range ins {
		if in.start.Time.Before(start.Time) {
			start.Time = in.start.Time
		}
	}
	// The run_start goes first, carrying every part; its counts are known at the end,
	// so they are also in the returned result, and the parts here list indices and skew.
	res.Shard = Shard{Count: count, SharedStart: first.shard.SharedStart}
	for _, in := range ins {
		res.Shard.Parts = append(res.Shard.Parts, in.part)
	}
	start.Shard = &res.Shard
	if err := enc(&start); err != nil {
		return res, fmt.Errorf("ledger: merge: %w", err)
	}
	note := Event{Time: start.Time, Type: EventNote, Message: fmt.Sprintf("merged from %d of %d shards; largest start skew %.3fs", len(ins), count, res.Shard.MaxSkew())}
	if res.Shard.SharedStart == nil {
		note.Message = fmt.Sprintf("merged from %d of %d shards; no shared start was given, so start skew was not measured", len(ins), count)
	}
	if err := enc(&note); err != nil {
		return res, fmt.Errorf("ledger: merge: %w", err)
	}

	h := mergeHeap{}
	var errs, interrupts []string
	end := start.Time
	for _, in := range ins {
		in.part.Events = 1 // its run_start
		if in.next() {
			h = append(h, in)
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		in := h[0]
		hd := &in.head
		if hd.Time.After(end) {
			end = hd.Time
		}
		keep := true
		switch hd.Type {
		case EventRunStart:
			problem("%s: a second run_start at line %d", in.path, in.n)
			keep = false
		case EventRunEnd:
			in.ended = true
			keep = false
			if hd.Error != "" {
				errs = append(errs, fmt.Sprintf("shard %d: %s", in.shard.Index, hd.Error))
			}
			if hd.Interrupted != "" {
				interrupts = append(interrupts, fmt.Sprintf("shard %d: %s", in.shard.Index, hd.Interrupted))
			}
		case EventFaultStart, EventFaultStop, EventFaultVerified:
			keep = in.shard.Index == 1 // each fault once: only shard 1 applies faults
		case EventDone:
			in.part.Requests++
		}
		in.part.Events++
		switch {
		case !keep:
		case hd.Type == EventDrain || hd.Type == EventLeakCheck || hd.Type == EventSelfCheck:
			// Each shard drains and checks on its own: say whose check this is, so reports
			// can tell which leak check saw no other shard's traffic.
			var ev Event
			if err := json.Unmarshal(in.line, &ev); err != nil {
				return res, fmt.Errorf("ledger: merge: %s line %d: %w", in.path, in.n, err)
			}
			ev.Part = in.shard.Index
			if err := enc(&ev); err != nil {
				return res, fmt.Errorf("ledger: merge: %w", err)
			}
		default:
			bw.Write(in.line)
			res.Events++
		}
		if in.next() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	for i, in := range ins {
		res.Shard.Parts[i] = in.part
		switch {
		case in.bad != nil:
			problem("shard %d (%s): unreadable ledger: %v", in.shard.Index, in.path, in.bad)
		case in.torn:
			problem("shard %d (%s): torn ledger (its last line is incomplete: the shard was killed)", in.shard.Index, in.path)
		case !in.ended:
			problem("shard %d (%s): incomplete ledger (no run_end: the shard did not finish)", in.shard.Index, in.path)
		}
	}
	runEnd := Event{Time: end, Type: EventRunEnd, Interrupted: strings.Join(interrupts, "; ")}
	all := append(append([]string(nil), res.Problems...), errs...)
	if len(res.Problems) > 0 {
		all[0] = "merge: " + all[0]
	}
	runEnd.Error = strings.Join(all, "; ")
	if err := enc(&runEnd); err != nil {
		return res, fmt.Errorf("ledger: merge: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return res, fmt.Errorf("ledger: merge: %w", err)
	}
	return res, nil
}
