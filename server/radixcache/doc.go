// Package radixcache is the reference engine's prefix cache: a radix tree over
// page-sized token blocks, as SGLang's RadixAttention (python/sglang/srt/mem_cache/
// radix_cache.py) with a page size: each edge is one page of tokens, each node owns the
// KV page holding them. A request reuses the longest cached prefix's pages, locks the
// nodes it uses while it runs, and gives its own full pages to the tree when it
// finishes; eviction frees unlocked leaves, least recently used first, when the pool
// needs pages.
//
// It is a pure data structure: no clock (recency is a counter bumped on every match and
// insert), no goroutines, no I/O. The scheduler consults it; the simulator runs the same
// scheduler, so the same code decides hits in both.
//
//	m := c.Match(prompt[:len(prompt)-1]) // whole pages only; leave one token to compute
//	c.Lock(m)                            // m.Pages are now the request's first pages
//	...                                  // compute the rest from position m.Tokens
//	dup := c.Insert(tokens, pages)       // the tree owns the new full pages; free dup
//	c.Unlock(m)
//	freed := c.Evict(need)               // LRU unlocked leaves; free these pages
package radixcache
