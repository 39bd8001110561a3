package ledger

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkMerge merges synthetic shard ledgers of realistic done events (with ITL
// arrays, as a streaming request writes them) into io.Discard. PDSOAK_MERGE_EVENTS sets
// the total (default 1M); the shards are 4. It reports events/s, MB/s and the merge's
// peak heap (which stays per-shard, not per-event: the merge is a k-way stream).
func BenchmarkMerge(b *testing.B) {
	total := 1_000_000
	if s := os.Getenv("PDSOAK_MERGE_EVENTS"); s != "" {
		total, _ = strconv.Atoi(s)
	}
	const shards = 4
	dir := b.TempDir()
	var paths []string
	var bytesIn int64
	for i := 1; i <= shards; i++ {
		p := filepath.Join(dir, fmt.Sprintf("shard%d.jsonl", i))
		bytesIn += writeSyntheticShard(b, p, i, shards, total/shards)
		paths = append(paths, p)
	}
	// The baseline: reading the same ledgers once with the sequential reader (what any
	// report of them costs anyway), in the same run, on the same loaded machine.
	b.Run("read", func(b *testing.B) {
		b.SetBytes(bytesIn)
		var start time.Time
		for i := 0; i < b.N; i++ {
			start = time.Now()
			for _, p := range paths {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Read(bufio.NewReaderSize(f, 1<<20), func(Event) error { return nil }); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		}
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
	})
	b.Run("merge", func(b *testing.B) {
		b.SetBytes(bytesIn)
		var start time.Time
		var peak uint64
		for i := 0; i < b.N; i++ {
			stop := make(chan struct{})
			done := make(chan uint64)
			go func() { // sample the live heap: the merge must not grow with the ledgers
				var m runtime.MemStats
				var hi uint64
				t := time.NewTicker(50 * time.Millisecond)
				defer t.Stop()
				for {
					runtime.ReadMemStats(&m)
					hi = max(hi, m.HeapInuse)
					select {
					case <-stop:
						done <- hi
						return
					case <-t.C:
					}
				}
			}()
			start = time.Now()
			res, err := Merge(paths, io.Discard)
			if err != nil || len(res.Problems) > 0 {
				b.Fatal(err, res.Problems)
			}
			close(stop)
			peak = max(peak, <-done)
		}
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
		b.ReportMetric(float64(bytesIn)/float64(total), "bytes/event")
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	})
}

func writeSyntheticShard(b *testing.B, path string, index, count, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	at := mt0
	_ = enc.Encode(Event{Time: at, Type: EventRunStart, Scenario: "s", Seed: 1, Shard: &Shard{Index: index, Count: count}})
	itl := []float64{0.011, 0.012, 0.010, 0.013, 0.011, 0.012, 0.010, 0.011}
	for k := 0; k < n-2; k++ {
		at = at.Add(time.Duration(count) * time.Millisecond)
		ev := Event{Time: at.Add(time.Duration(index) * time.Microsecond), RequestID: ShardID(fmt.Sprintf("w-%08d", k*count+index), index), Workload: "w"}
		// A request writes scheduled, sent, first_token and done: one of each kind in four.
		switch k % 4 {
		case 0:
			ev.Type = EventScheduled
		case 1:
			ev.Type, ev.Lag = EventSent, 0.0004
		case 2:
			ev.Type, ev.TTFT = EventFirstToken, 0.05
		default:
			ev.Type, ev.Outcome, ev.TTFT, ev.E2E, ev.ITL, ev.CompletionTokens, ev.Chunks, ev.Bytes = EventDone, OutcomeOK, 0.05, 0.14, itl, 9, 9, 1800
		}
		if err := enc.Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
	_ = enc.Encode(Event{Time: at.Add(time.Second), Type: EventRunEnd})
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	st, _ := f.Stat()
	return st.Size()
}
