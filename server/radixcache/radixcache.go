package radixcache

import (
	"container/heap"
	"encoding/binary"
	"fmt"
)

// Cache is the radix tree. Not safe for concurrent use.
type Cache struct {
	pageSize int
	root     *node
	clock    uint64
	pages    int // cached pages (nodes other than the root)
	locked   int // nodes with a lock count > 0
	lockedPg int // pages under a lock (not evictable)
	evicted  uint64
}

type node struct {
	key      string // the page's tokens, encoded
	page     int32
	parent   *node
	children map[string]*node
	lock     int
	last     uint64
}

// Match is the longest cached prefix of a token sequence.
type Match struct {
	// Pages hold the KV of the first Tokens tokens, in order.
	Pages []int32
	// Tokens is len(Pages) × the page size.
	Tokens int
	last   *node
}

// Stats describe the tree.
type Stats struct {
	// CachedPages are the pages the tree owns.
	CachedPages int
	// EvictablePages are cached pages no running request locks: free for the asking,
	// so they count as free in token usage (as SGLang's evictable_size).
	EvictablePages int
	// LockedNodes are nodes a live request holds. After a drain it must be 0: a locked
	// node left behind is a leak (its pages are never evictable again).
	LockedNodes int
	// EvictedPages counts pages evicted since New.
	EvictedPages uint64
}

// New returns an empty cache over pages of pageSize tokens.
func New(pageSize int) *Cache {
	if pageSize < 1 {
		pageSize = 1
	}
	return &Cache{pageSize: pageSize, root: &node{children: map[string]*node{}, page: -1}}
}

// PageSize is the page size in tokens.
func (c *Cache) PageSize() int { return c.pageSize }

func (c *Cache) key(tokens []int) string {
	b := make([]byte, 0, len(tokens)*4)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return string(b)
}

// Match returns the longest cached prefix of tokens, in whole pages, and marks its
// nodes used now.
func (c *Cache) Match(tokens []int) Match {
	c.clock++
	var m Match
	n := c.root
	for off := 0; off+c.pageSize <= len(tokens); off += c.pageSize {
		child, ok := n.children[c.key(tokens[off:off+c.pageSize])]
		if !ok {
			break
		}
		child.last = c.clock
		m.Pages = append(m.Pages, child.page)
		n = child
	}
	m.Tokens = len(m.Pages) * c.pageSize
	if n != c.root {
		m.last = n
	}
	return m
}

// Lock holds m's nodes (and so their pages) until Unlock: they are not evicted.
func (c *Cache) Lock(m Match) {
	for n := m.last; n != nil && n != c.root; n = n.parent {
		if n.lock == 0 {
			c.locked++
			c.lockedPg++
		}
		n.lock++
	}
}

// Unlock releases a Lock. Unlocking what was not locked panics: it is a bookkeeping bug
// that would otherwise let a running request's pages be evicted.
func (c *Cache) Unlock(m Match) {
	for n := m.last; n != nil && n != c.root; n = n.parent {
		if n.lock == 0 {
			panic("radixcache: unlock of an unlocked node")
		}
		n.lock--
		if n.lock == 0 {
			c.locked--
			c.lockedPg--
		}
	}
}

// Insert adds the full pages of a computed sequence: pages[i] holds tokens
// [i×PageSize, (i+1)×PageSize). The tree takes the pages it did not have; it returns
// the caller's pages for blocks it already had (the caller frees them). Pages beyond
// the tokens' full pages are ignored (not returned either).
func (c *Cache) Insert(tokens []int, pages []int32) (dup []int32) {
	c.clock++
	full := min(len(tokens)/c.pageSize, len(pages))
	n := c.root
	for i := 0; i < full; i++ {
		k := c.key(tokens[i*c.pageSize : (i+1)*c.pageSize])
		child, ok := n.children[k]
		if ok {
			if child.page != pages[i] {
				dup = append(dup, pages[i])
			}
		} else {
			child = &node{key: k, page: pages[i], parent: n, children: map[string]*node{}}
			n.children[k] = child
			c.pages++
		}
		child.last = c.clock
		n = child
	}
	return dup
}

// Owns reports how many of pages (a request's, in order) are the tree's own: the
// request's matched prefix, which the request must not free.
func (m Match) Owns() int { return len(m.Pages) }

// Evict removes up to want pages, least recently used unlocked leaves first (a parent
// becomes a candidate once its last child goes), and returns them for the caller to
// free.
func (c *Cache) Evict(want int) []int32 {
	if want <= 0 {
		return nil
	}
	h := &lru{}
	c.walk(c.root, func(n *node) {
		if n != c.root && len(n.children) == 0 && n.lock == 0 {
			*h = append(*h, n)
		}
	})
	heap.Init(h)
	var out []int32
	for len(out) < want && h.Len() > 0 {
		n := heap.Pop(h).(*node)
		p := n.parent
		delete(p.children, n.key)
		c.pages--
		c.evicted++
		out = append(out, n.page)
		if p != c.root && len(p.children) == 0 && p.lock == 0 {
			heap.Push(h, p)
		}
	}
	return out
}

func (c *Cache) walk(n *node, fn func(*node)) {
	fn(n)
	for _, ch := range n.children {
		c.walk(ch, fn)
	}
}

// Stats returns the tree's counts.
func (c *Cache) Stats() Stats {
	return Stats{CachedPages: c.pages, EvictablePages: c.pages - c.lockedPg, LockedNodes: c.locked, EvictedPages: c.evicted}
}

// Pages returns every page the tree owns (for a leak check or a shutdown).
func (c *Cache) Pages() []int32 {
	var out []int32
	c.walk(c.root, func(n *node) {
		if n != c.root {
			out = append(out, n.page)
		}
	})
	return out
}

// Check verifies the tree's counters against its nodes (tests, fuzzing).
func (c *Cache) Check() error {
	pages, locked := 0, 0
	seen := map[int32]bool{}
	var err error
	c.walk(c.root, func(n *node) {
		if n == c.root {
			return
		}
		pages++
		if n.lock > 0 {
			locked++
		}
		if seen[n.page] && err == nil {
			err = fmt.Errorf("radixcache: page %d in two nodes", n.page)
		}
		seen[n.page] = true
		if n.parent.lock < n.lock && n.parent != c.root && err == nil {
			err = fmt.Errorf("radixcache: node locked %d under a parent locked %d", n.lock, n.parent.lock)
		}
	})
	if err != nil {
		return err
	}
	if pages != c.pages || locked != c.locked || locked != c.lockedPg {
		return fmt.Errorf("radixcache: counted %d pages %d locked, recorded %d pages %d locked", pages, locked, c.pages, c.locked)
	}
	return nil
}

// lru orders leaves by last use, then page id (deterministic ties).
type lru []*node

func (h lru) Len() int { return len(h) }
func (h lru) Less(i, j int) bool {
	if h[i].last != h[j].last {
		return h[i].last < h[j].last
	}
	return h[i].page < h[j].page
}
func (h lru) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *lru) Push(x any)   { *h = append(*h, x.(*node)) }
func (h *lru) Pop() any {
	old := *h
	n := old[len(old)-1]
	*h = old[:len(old)-1]
	return n
}
