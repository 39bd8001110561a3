package kvpool

import (
	"errors"
	"fmt"
	"math"

	"pdsoak/kernels"
)

// Owner identifies who holds a page (the scheduler uses a request's sequence number).
// The zero Owner means "free" and is never a valid owner.
type Owner uint64

// Pool is a paged allocator. It is not safe for concurrent use.
type Pool struct {
	owner []Owner // owner[p] == 0: page p is free
	free  []int32 // stack of free pages
	held  map[Owner]int
}

// New returns a pool of n pages, all free. Pages are handed out lowest index first.
func New(n int) *Pool {
	if n < 0 {
		n = 0
	}
	p := &Pool{owner: make([]Owner, n), free: make([]int32, n), held: map[Owner]int{}}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i)
	}
	return p
}

// Capacity is the total number of pages.
func (p *Pool) Capacity() int { return len(p.owner) }

// FreePages is the number of pages not owned by anyone.
func (p *Pool) FreePages() int { return len(p.free) }

// UsedPages is the number of owned pages; UsedPages()+FreePages() == Capacity().
func (p *Pool) UsedPages() int { return len(p.owner) - len(p.free) }

// Held is the number of pages owner holds.
func (p *Pool) Held(o Owner) int { return p.held[o] }

// Owners is the number of distinct owners holding at least one page.
func (p *Pool) Owners() int { return len(p.held) }

// OwnerOf returns the owner of page pg (0 when free or out of range).
func (p *Pool) OwnerOf(pg int32) Owner {
	if pg < 0 || int(pg) >= len(p.owner) {
		return 0
	}
	return p.owner[pg]
}

// Alloc hands n pages to o. It allocates nothing and returns ok=false when fewer than n
// pages are free. Alloc(o, 0) returns an empty slice and true.
func (p *Pool) Alloc(o Owner, n int) ([]int32, bool) {
	if o == 0 || n < 0 || n > len(p.free) {
		return nil, false
	}
	out := make([]int32, n)
	top := len(p.free)
	for i := range n {
		pg := p.free[top-1-i]
		p.owner[pg] = o
		out[i] = pg
	}
	p.free = p.free[:top-n]
	if n > 0 {
		p.held[o] += n
	}
	return out, true
}

// ErrNotOwner is returned by Free for a page that is free or held by someone else.
var ErrNotOwner = errors.New("kvpool: page not owned by caller")

// Free gives pages back. Every page must be owned by o; if one is not, Free frees
// nothing and returns an error wrapping ErrNotOwner (a double free or a bookkeeping bug).
func (p *Pool) Free(o Owner, pages []int32) error {
	seen := make(map[int32]struct{}, len(pages))
	for _, pg := range pages {
		if pg < 0 || int(pg) >= len(p.owner) {
			return fmt.Errorf("kvpool: free of page %d outside [0,%d): %w", pg, len(p.owner), ErrNotOwner)
		}
		if p.owner[pg] != o {
			return fmt.Errorf("kvpool: free of page %d by owner %d, held by %d: %w", pg, o, p.owner[pg], ErrNotOwner)
		}
		if _, dup := seen[pg]; dup {
			return fmt.Errorf("kvpool: page %d listed twice in one free: %w", pg, ErrNotOwner)
		}
		seen[pg] = struct{}{}
	}
	for _, pg := range pages {
		p.owner[pg] = 0
		p.free = append(p.free, pg)
	}
	if len(pages) > 0 {
		if p.held[o] -= len(pages); p.held[o] == 0 {
			delete(p.held, o)
		}
	}
	return nil
}

// PagesFor is the number of pages of pageSize tokens needed to hold tokens tokens.
func PagesFor(tokens, pageSize int) int {
	if tokens <= 0 || pageSize <= 0 {
		return 0
	}
	return (tokens + pageSize - 1) / pageSize
}

// CapacityConfig holds the SGLang knobs that size the pool.
type CapacityConfig struct {
	// MaxTotalTokens (--max-total-tokens), when > 0, is the pool size in tokens.
	MaxTotalTokens int
	// MemFractionStatic (--mem-fraction-static) of DeviceMemoryGB (--device-memory-gb)
	// is given to the KV cache when MaxTotalTokens is 0.
	MemFractionStatic float64
	DeviceMemoryGB    float64
	// PageSize (--page-size) in tokens.
	PageSize int
}

// Capacity returns the pool size in pages: MaxTotalTokens ÷ PageSize when set, else
// MemFractionStatic × DeviceMemoryGB GiB ÷ info.ModelKVBytesPerToken ÷ PageSize. The
// flags' own ranges are checked once, by scheduler.Limits.Validate; Capacity reports what
// only the combination with the model can tell: a pool of no page at all, or too many.
func Capacity(c CapacityConfig, info kernels.ModelInfo) (int, error) {
	if c.PageSize <= 0 {
		return 0, fmt.Errorf("kvpool: page size must be > 0 (got %d)", c.PageSize)
	}
	if c.MaxTotalTokens > 0 {
		pages := c.MaxTotalTokens / c.PageSize
		if pages == 0 {
			return 0, fmt.Errorf("kvpool: --max-total-tokens %d is less than one page of %d tokens", c.MaxTotalTokens, c.PageSize)
		}
		return pages, nil
	}
	if !(c.DeviceMemoryGB > 0) || math.IsInf(c.DeviceMemoryGB, 0) {
		return 0, fmt.Errorf("kvpool: --device-memory-gb must be > 0 when --max-total-tokens is not set (got %v)", c.DeviceMemoryGB)
	}
	if info.ModelKVBytesPerToken <= 0 {
		return 0, fmt.Errorf("kvpool: model %q reports %d KV bytes per token", info.Name, info.ModelKVBytesPerToken)
	}
	bytes := c.MemFractionStatic * c.DeviceMemoryGB * (1 << 30)
	tokens := bytes / float64(info.ModelKVBytesPerToken)
	pages := tokens / float64(c.PageSize)
	if pages > math.MaxInt32 {
		return 0, fmt.Errorf("kvpool: %.0f pages is more than the pool can index", pages)
	}
	if !(pages >= 1) {
		return 0, fmt.Errorf("kvpool: --mem-fraction-static %v × --device-memory-gb %v GiB holds %s of %d KV bytes, less than one page of %d tokens",
			c.MemFractionStatic, c.DeviceMemoryGB, plural(int(tokens), "token"), info.ModelKVBytesPerToken, c.PageSize)
	}
	return int(pages), nil
}

// plural is "1 token", "2 tokens".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Transfer hands pages from owner from to owner to (a finished request's pages adopted
// by the prefix cache). Like Free it moves nothing and returns an error wrapping
// ErrNotOwner when a page is not from's.
func (p *Pool) Transfer(from, to Owner, pages []int32) error {
	if to == 0 {
		return fmt.Errorf("kvpool: transfer to the free owner: %w", ErrNotOwner)
	}
	for _, pg := range pages {
		if pg < 0 || int(pg) >= len(p.owner) || p.owner[pg] != from {
			return fmt.Errorf("kvpool: transfer of page %d by owner %d: %w", pg, from, ErrNotOwner)
		}
	}
	for _, pg := range pages {
		p.owner[pg] = to
	}
	if n := len(pages); n > 0 {
		if p.held[from] -= n; p.held[from] == 0 {
			delete(p.held, from)
		}
		p.held[to] += n
	}
	return nil
}
