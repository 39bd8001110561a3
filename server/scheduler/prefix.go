package scheduler

import (
	"fmt"
	"math"
	"slices"

	"pdsoak/server/kvpool"
	"pdsoak/server/radixcache"
)

// The radix prefix cache (Limits.RadixCache; --disable-radix-cache turns it off), on
// prefill and colocated workers: the worker that computes a prompt decides how much of
// it is computed (a decode worker receives whole prompts, as SGLang's decode does).
// A request admitted for its prompt first takes the longest cached prefix (whole pages,
// leaving at least one token to compute), locks it and computes from there; when it
// ends, its computed full pages go to the tree and the lock is released. The pool's
// pages the tree holds belong to cacheOwner; unlocked ones are evicted, least recently
// used first, when an allocation would otherwise fail, and count as free in the stats.

// cacheOwner owns the prefix cache's pages in the pool.
const cacheOwner = kvpool.Owner(math.MaxUint64)

// cacheOn reports whether this worker consults a prefix cache.
func (s *Scheduler) cacheOn() bool { return s.cache != nil }

func newCache(cfg Config) *radixcache.Cache {
	if !cfg.RadixCache || cfg.Role == RoleDecode {
		return nil
	}
	return radixcache.New(cfg.PageSize)
}

// matchPrefix gives r, which holds no pages, the cached prefix of its tokens, locked.
func (s *Scheduler) matchPrefix(r *request) {
	if !s.cacheOn() || len(r.pages) > 0 || len(r.tokens) < 2 {
		return
	}
	m := s.cache.Match(r.tokens[:len(r.tokens)-1])
	s.cache.Lock(m)
	r.match = m
	r.pages = slices.Clone(m.Pages)
	r.cached = m.Tokens
	r.prefix = m.Tokens
}

// unmatch gives back a prefix r took but could not use this step (no pages for the rest,
// no budget): it waits without holding the tree.
func (s *Scheduler) unmatch(r *request) {
	if !s.cacheOn() || r.match.Owns() == 0 || len(r.pages) != r.match.Owns() {
		return
	}
	s.cache.Unlock(r.match)
	r.match, r.pages, r.cached, r.prefix = radixcache.Match{}, nil, 0, 0
}

// counted records r's prompt in the hit-rate counters once, when it first runs.
func (s *Scheduler) counted(r *request) {
	if !s.cacheOn() || r.countedCache {
		return
	}
	r.countedCache = true
	s.cacheQueried += uint64(r.nPrompt)
	s.cacheHit += uint64(min(r.prefix, r.nPrompt))
}

// evictFor frees unlocked cached pages until need pages are free (or nothing is left).
func (s *Scheduler) evictFor(need int) {
	if !s.cacheOn() || s.pool.FreePages() >= need {
		return
	}
	freed := s.cache.Evict(need - s.pool.FreePages())
	if err := s.pool.Free(cacheOwner, freed); err != nil {
		panic(fmt.Sprintf("scheduler: prefix cache eviction: %v", err)) // a bookkeeping bug
	}
}

// releaseCached ends r's use of the tree: its computed full pages are inserted (the
// tree adopts the ones it lacked), its lock released. It returns the pages r still
// owns, for the caller to free.
func (s *Scheduler) releaseCached(r *request) []int32 {
	if !s.cacheOn() {
		return r.pages
	}
	own := r.pages[r.match.Owns():]
	full := min(r.cached/s.cfg.PageSize, len(r.pages))
	var keep []int32 // r's pages the tree adopted
	if full > r.match.Owns() {
		dup := s.cache.Insert(r.tokens[:full*s.cfg.PageSize], r.pages[:full])
		for _, pg := range r.pages[r.match.Owns():full] {
			if !slices.Contains(dup, pg) {
				keep = append(keep, pg)
			}
		}
		if err := s.pool.Transfer(kvpool.Owner(r.seq), cacheOwner, keep); err != nil {
			panic(fmt.Sprintf("scheduler: request %s: prefix cache insert: %v", r.id, err))
		}
	}
	s.cache.Unlock(r.match)
	r.match = radixcache.Match{}
	if len(keep) == 0 {
		return own
	}
	out := make([]int32, 0, len(own)-len(keep))
	for _, pg := range own {
		if !slices.Contains(keep, pg) {
			out = append(out, pg)
		}
	}
	return out
}

// cacheStats fills the prefix cache's part of st.
func (s *Scheduler) cacheStats(st *Stats) {
	if !s.cacheOn() {
		return
	}
	cs := s.cache.Stats()
	st.UsedPages -= cs.EvictablePages // SGLang: evictable cache counts as available
	st.CachedPages, st.LockedNodes = cs.CachedPages, cs.LockedNodes
	st.CacheQueriedTokens, st.CacheHitTokens = s.cacheQueried, s.cacheHit
	st.EvictedPages = cs.EvictedPages
}

// CacheStats is the prefix cache's part of Stats, live: unlike Stats in SGLang semantics
// it is never a frozen snapshot, so a leaked lock shows after a drain and a released
// one does not.
func (s *Scheduler) CacheStats() Stats {
	var st Stats
	s.cacheStats(&st)
	st.UsedPages = 0
	return st
}
