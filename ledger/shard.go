package ledger

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Shard is the run_start metadata of a sharded run. A shard's own ledger has Index
// 1..Count; a merged ledger has Index 0 and lists its shards in Parts, which reports
// checks against Count so a merge that lost a shard can never pass.
type Shard struct {
	Index int `json:"index,omitempty"` // 1-based; 0 in a merged ledger
	Count int `json:"count"`
	// SharedStart is the start time every shard waited for (zero: none was given); Skew
	// is how late this shard actually started against it, in seconds.
	SharedStart *time.Time `json:"shared_start,omitempty"`
	Skew        float64    `json:"skew,omitempty"`
	// Parts are the shards a merged ledger was made from, in index order.
	Parts []ShardPart `json:"parts,omitempty"`
}

// ShardPart is one shard of a merged ledger.
type ShardPart struct {
	Index    int     `json:"index"`
	Skew     float64 `json:"skew,omitempty"`
	Events   int     `json:"events"`
	Requests int     `json:"requests"` // done events
}

// Merged reports whether s describes a merged ledger.
func (s *Shard) Merged() bool { return s != nil && s.Index == 0 }

// MaxSkew is the largest start skew among a merged ledger's parts (or the shard's own).
func (s *Shard) MaxSkew() float64 {
	if s == nil {
		return 0
	}
	m := s.Skew
	for _, p := range s.Parts {
		m = max(m, p.Skew)
	}
	return m
}

// shardSep separates a request id from its shard tag: "agents-s001-t002~s3".
const shardSep = "~s"

// ShardID tags a request id with its shard, so shard ledgers never collide.
func ShardID(id string, index int) string { return id + shardSep + strconv.Itoa(index) }

// UnshardID strips the shard tag: the id the unsharded run gives the same request.
func UnshardID(id string) string {
	if i := strings.LastIndex(id, shardSep); i >= 0 {
		if _, err := strconv.Atoi(id[i+len(shardSep):]); err == nil {
			return id[:i]
		}
	}
	return id
}

// ShardOf is the shard index an id was tagged with by ShardID (0: none).
func ShardOf(id string) int {
	if i := strings.LastIndex(id, shardSep); i >= 0 {
		if n, err := strconv.Atoi(id[i+len(shardSep):]); err == nil {
			return n
		}
	}
	return 0
}

// ParseShard parses "i/n" (1 <= i <= n).
func ParseShard(s string) (index, count int, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("ledger: shard %q: want i/n, e.g. 2/4", s)
	}
	index, err1 := strconv.Atoi(a)
	count, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("ledger: shard %q: want i/n with whole numbers, e.g. 2/4", s)
	}
	if count < 1 || index < 1 || index > count {
		return 0, 0, fmt.Errorf("ledger: shard %q: want 1 <= i <= n", s)
	}
	return index, count, nil
}
