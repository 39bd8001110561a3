package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var mt0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// shardLedger is a finished shard's ledger: requests done events interleaved in time
// with the other shards' (request k at k ms, shard i taking k%count == i-1), a fault
// pair, and run_end.
func shardLedger(index, count, requests int) []Event {
	start := mt0
	evs := []Event{{Time: start, Type: EventRunStart, Scenario: "s", Seed: 7,
		Shard: &Shard{Index: index, Count: count, SharedStart: &start, Skew: float64(index) / 1000}}}
	evs = append(evs, Event{Time: mt0.Add(time.Millisecond), Type: EventFaultStart, Fault: "f", FaultType: "kill"},
		Event{Time: mt0.Add(2 * time.Millisecond), Type: EventFaultStop, Fault: "f"})
	for k := 0; k < requests; k++ {
		if k%count != index-1 {
			continue
		}
		evs = append(evs, Event{Time: mt0.Add(time.Duration(k+3) * time.Millisecond), Type: EventDone,
			RequestID: ShardID(fmt.Sprintf("w-%06d", k), index), Outcome: OutcomeOK})
	}
	end := mt0.Add(time.Duration(requests+5)*time.Millisecond + time.Duration(index)*time.Microsecond)
	evs = append(evs, Event{Time: end, Type: EventDrain, Passed: Bool(true)},
		Event{Time: end.Add(time.Microsecond), Type: EventLeakCheck, Started: &end, Passed: Bool(true)})
	return append(evs, Event{Time: mt0.Add(time.Duration(requests+10) * time.Millisecond), Type: EventRunEnd})
}

func writeLedger(t testing.TB, dir, name string, evs []Event, cut int) string {
	t.Helper()
	var b bytes.Buffer
	for _, e := range evs {
		line, err := json.Marshal(e)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b.Bytes()[:b.Len()-cut], 0o644))
	return p
}

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	full := func(i, n int) string {
		return writeLedger(t, dir, fmt.Sprintf("full-%d-%d", i, n), shardLedger(i, n, 40), 0)
	}
	noEnd := func(i, n int) string {
		evs := shardLedger(i, n, 40)
		return writeLedger(t, dir, fmt.Sprintf("noend-%d-%d", i, n), evs[:len(evs)-1], 0)
	}
	torn := writeLedger(t, dir, "torn", shardLedger(2, 2, 40), 5)
	otherSeed := func() string {
		evs := shardLedger(2, 2, 40)
		evs[0].Seed = 8
		return writeLedger(t, dir, "seed", evs, 0)
	}
	tests := []struct {
		name     string
		paths    []string
		requests int
		problem  string // "": none
	}{
		{"one shard", []string{full(1, 1)}, 40, ""},
		{"four shards in any order", []string{full(3, 4), full(1, 4), full(4, 4), full(2, 4)}, 40, ""},
		{"a shard missing", []string{full(1, 4), full(2, 4), full(4, 4)}, 30, "shard 3 of 4 missing"},
		{"no run_end", []string{full(1, 2), noEnd(2, 2)}, 40, "incomplete ledger (no run_end"},
		{"torn", []string{full(1, 2), torn}, 40, "torn ledger"},
		{"twice", []string{full(1, 2), full(1, 2), full(2, 2)}, 60, "shard 1 given twice"},
		{"counts differ", []string{full(1, 2), full(2, 3)}, 33, "is of 2 shards"},
		{"seeds differ", []string{full(1, 2), otherSeed()}, 40, "seed 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := Merge(tt.paths, &out)
			require.NoError(t, err)
			evs, st, err := ReadAll(&out)
			require.NoError(t, err)
			require.False(t, st.Torn)
			require.Equal(t, EventRunStart, evs[0].Type)
			require.NotNil(t, evs[0].Shard)
			assert.True(t, evs[0].Shard.Merged())
			last := evs[len(evs)-1]
			require.Equal(t, EventRunEnd, last.Type)
			done, faults := 0, 0
			checks := map[EventType][]int{} // drain and leak_check: the shards the merge stamped
			for i, e := range evs {
				if i > 0 {
					assert.False(t, e.Time.Before(evs[i-1].Time), "event %d out of order", i)
				}
				switch e.Type {
				case EventDone:
					done++
				case EventFaultStart:
					faults++
				case EventDrain, EventLeakCheck:
					checks[e.Type] = append(checks[e.Type], e.Part)
					if e.Type == EventLeakCheck {
						assert.NotNil(t, e.Started, "the leak check's start survives the merge")
					}
				case EventRunStart, EventRunEnd:
					assert.True(t, i == 0 || i == len(evs)-1, "one run_start and one run_end")
				}
			}
			assert.Equal(t, tt.requests, done, "every shard's requests, exactly")
			var parts []int
			for _, p := range tt.paths {
				evs, _, err := ReadFile(p)
				require.NoError(t, err)
				parts = append(parts, evs[0].Shard.Index)
			}
			for _, typ := range []EventType{EventDrain, EventLeakCheck} {
				assert.ElementsMatch(t, parts, checks[typ], "each shard's %s, stamped with its shard", typ)
			}
			if strings.Contains(tt.name, "twice") {
				assert.Equal(t, 2, faults, "shard 1's faults, given twice")
			} else {
				assert.Equal(t, 1, faults, "each fault once, from shard 1")
			}
			if tt.problem == "" {
				assert.Empty(t, res.Problems)
				assert.Empty(t, last.Error)
				return
			}
			assert.Contains(t, strings.Join(res.Problems, "\n"), tt.problem)
			assert.Contains(t, last.Error, tt.problem, "the reason travels in run_end, for reports")
		})
	}
}

func TestMergeRefusesNonShardLedgers(t *testing.T) {
	dir := t.TempDir()
	evs := shardLedger(1, 1, 3)
	evs[0].Shard = nil
	_, err := Merge([]string{writeLedger(t, dir, "plain", evs, 0)}, &bytes.Buffer{})
	require.ErrorContains(t, err, "not a shard's ledger")
	_, err = Merge([]string{writeLedger(t, dir, "nostart", evs[1:], 0)}, &bytes.Buffer{})
	require.ErrorContains(t, err, "not run_start")
	_, err = Merge(nil, &bytes.Buffer{})
	require.Error(t, err)
}

func TestShardIDs(t *testing.T) {
	for _, id := range []string{"w-000001", "agents-s001-t002-r1", "a~sb", "x~s"} {
		assert.Equal(t, id, UnshardID(ShardID(id, 3)), id)
		assert.Equal(t, id, UnshardID(id), "an unsharded id is its own")
		assert.Equal(t, 3, ShardOf(ShardID(id, 3)), id)
		assert.Zero(t, ShardOf(id), "an unsharded id has no shard")
	}
}

func FuzzParseShard(f *testing.F) {
	for _, s := range []string{"1/1", "2/4", "0/4", "5/4", "a/b", "", "/", "1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		i, n, err := ParseShard(s)
		if err != nil {
			return
		}
		if i < 1 || i > n {
			t.Fatalf("ParseShard(%q) = %d/%d", s, i, n)
		}
		j, m, err := ParseShard(fmt.Sprintf("%d/%d", i, n))
		if err != nil || j != i || m != n {
			t.Fatalf("ParseShard does not round-trip %q", s)
		}
	})
}

func FuzzUnshardID(f *testing.F) {
	for _, s := range []string{"w-000001", "a~s1", "~s", "x~s12~s3"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, id string, i int) {
		if i < 1 {
			return
		}
		if got := UnshardID(ShardID(id, i)); got != id {
			t.Fatalf("UnshardID(ShardID(%q, %d)) = %q", id, i, got)
		}
		if got := ShardOf(ShardID(id, i)); got != i {
			t.Fatalf("ShardOf(ShardID(%q, %d)) = %d", id, i, got)
		}
	})
}

// TestMergeOddShardCounts: a run_start whose shard count is absurd (a corrupted or
// hand-edited ledger, or --shard 1/1000000000000) or whose index lies outside it is a
// problem the merge names, file and field; it does not make the merge list a trillion
// missing shards one by one (it never returned, growing without bound).
func TestMergeOddShardCounts(t *testing.T) {
	dir := t.TempDir()
	huge := shardLedger(1, 1, 3)
	huge[0].Shard.Count = 1 << 40
	res, err := Merge([]string{writeLedger(t, dir, "huge", huge, 0)}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Contains(t, res.Problems, fmt.Sprintf("shard 2-%d of %d missing", 1<<40, 1<<40))

	out := shardLedger(5, 4, 3)
	res, err = Merge([]string{writeLedger(t, dir, "out", out, 0)}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Contains(t, res.Problems, filepath.Join(dir, "out")+": run_start shard 5/4: the index is not within 1..count")
}

// FuzzMerge: whatever a shard's ledger holds after its run_start, Merge returns (an
// error or a merged ledger) and never panics or runs away; what it writes starts with
// run_start and ends with run_end (lines are passed through whole, not re-checked: a
// line reports cannot read makes the merged run invalid there), and a ledger without a
// run_end is always a problem.
func FuzzMerge(f *testing.F) {
	var b bytes.Buffer
	for _, e := range shardLedger(1, 1, 4) {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	whole := b.Bytes()
	f.Add(whole)
	f.Add(whole[:len(whole)-7])
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","type":"run_start","shard":{"index":1,"count":3}}` + "\n{\n"))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","type":"run_start","shard":{"index":2,"count":1}}` + "\n"))
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","type":"run_start","shard":{"index":1,"count":-4}}` + "\n"))
	f.Add([]byte(`{"time":"x","type":"done"}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "shard")
		require.NoError(t, os.WriteFile(p, data, 0o644))
		var out bytes.Buffer
		res, err := Merge([]string{p}, &out)
		if err != nil {
			return
		}
		lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		var first, last mergeHead
		require.NoError(t, json.Unmarshal(lines[0], &first))
		require.NoError(t, json.Unmarshal(lines[len(lines)-1], &last))
		assert.Equal(t, EventRunStart, first.Type)
		assert.Equal(t, EventRunEnd, last.Type)
		ended := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			var h mergeHead
			if json.Unmarshal(line, &h) == nil && h.Type == EventRunEnd {
				ended = true
			}
		}
		if !ended {
			assert.NotEmpty(t, res.Problems, "a ledger without run_end merged without a problem")
		}
	})
}
