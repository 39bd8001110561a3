package kvpool

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
)

// checkInvariants verifies that no page is owned twice, every held page is accounted to
// its owner and free + used == capacity.
func checkInvariants(t *testing.T, p *Pool, held map[Owner][]int32) {
	t.Helper()
	if p.FreePages()+p.UsedPages() != p.Capacity() {
		t.Fatalf("free %d + used %d != capacity %d", p.FreePages(), p.UsedPages(), p.Capacity())
	}
	seen := map[int32]Owner{}
	used := 0
	for o, pages := range held {
		if p.Held(o) != len(pages) {
			t.Fatalf("owner %d: pool says %d pages, model says %d", o, p.Held(o), len(pages))
		}
		for _, pg := range pages {
			if prev, ok := seen[pg]; ok {
				t.Fatalf("page %d owned by %d and %d", pg, prev, o)
			}
			seen[pg] = o
			if p.OwnerOf(pg) != o {
				t.Fatalf("page %d: pool owner %d, model owner %d", pg, p.OwnerOf(pg), o)
			}
			used++
		}
	}
	if used != p.UsedPages() {
		t.Fatalf("model holds %d pages, pool says %d used", used, p.UsedPages())
	}
	for _, pg := range p.free {
		if _, ok := seen[pg]; ok {
			t.Fatalf("page %d is both free and owned", pg)
		}
	}
}

// randomWalk runs steps random allocs and frees (some of them invalid on purpose)
// against a model and checks the invariants after each.
func randomWalk(t *testing.T, seed uint64, capacity, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	p := New(capacity)
	held := map[Owner][]int32{}
	for range steps {
		o := Owner(1 + rng.IntN(6))
		switch rng.IntN(4) {
		case 0, 1: // alloc
			n := rng.IntN(capacity/3 + 2)
			before := p.FreePages()
			got, ok := p.Alloc(o, n)
			if ok != (n <= before) {
				t.Fatalf("Alloc(%d) with %d free: ok=%v", n, before, ok)
			}
			if ok {
				held[o] = append(held[o], got...)
			}
		case 2: // free a random part of what o holds
			pages := held[o]
			if len(pages) == 0 {
				continue
			}
			k := 1 + rng.IntN(len(pages))
			if err := p.Free(o, pages[:k]); err != nil {
				t.Fatalf("valid free: %v", err)
			}
			held[o] = append([]int32(nil), pages[k:]...)
			if len(held[o]) == 0 {
				delete(held, o)
			}
		case 3: // invalid free: someone else's page, or a free page
			var victim int32 = int32(rng.IntN(capacity))
			if p.OwnerOf(victim) == o {
				continue
			}
			if err := p.Free(o, []int32{victim}); !errors.Is(err, ErrNotOwner) {
				t.Fatalf("free of page %d (owner %d) by %d: err=%v", victim, p.OwnerOf(victim), o, err)
			}
		}
		checkInvariants(t, p, held)
	}
}

func TestPoolRandomWalk(t *testing.T) {
	for seed := range uint64(20) {
		randomWalk(t, seed, 1+int(seed)*7, 300)
	}
}

func TestPoolQuick(t *testing.T) {
	f := func(seed uint64, capacity uint8) bool {
		randomWalk(t, seed, int(capacity)+1, 60)
		return !t.Failed()
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
}

func TestPoolFreeIsAllOrNothing(t *testing.T) {
	p := New(4)
	a, _ := p.Alloc(1, 2)
	b, _ := p.Alloc(2, 1)
	if err := p.Free(1, []int32{a[0], b[0]}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("mixed free: err=%v", err)
	}
	if p.Held(1) != 2 || p.Held(2) != 1 || p.UsedPages() != 3 {
		t.Fatalf("failed free changed the pool: held1=%d held2=%d used=%d", p.Held(1), p.Held(2), p.UsedPages())
	}
	if err := p.Free(1, []int32{a[0], a[0]}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("duplicate page in one free: err=%v", err)
	}
	if err := p.Free(1, a); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(1, a); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("double free: err=%v", err)
	}
	if p.Owners() != 1 {
		t.Fatalf("owners=%d, want 1", p.Owners())
	}
}

func TestPoolAllocEdges(t *testing.T) {
	p := New(3)
	if _, ok := p.Alloc(0, 1); ok {
		t.Fatal("owner 0 must be refused")
	}
	if got, ok := p.Alloc(1, 0); !ok || len(got) != 0 {
		t.Fatalf("Alloc(0) = %v, %v", got, ok)
	}
	if _, ok := p.Alloc(1, 4); ok || p.FreePages() != 3 {
		t.Fatal("over-allocation must fail and change nothing")
	}
	if got, ok := p.Alloc(1, 3); !ok || len(got) != 3 || got[0] != 0 {
		t.Fatalf("Alloc(3) = %v, %v", got, ok)
	}
}

func TestPagesFor(t *testing.T) {
	for _, tc := range []struct{ tokens, size, want int }{
		{0, 16, 0}, {1, 16, 1}, {16, 16, 1}, {17, 16, 2}, {5, 0, 0},
	} {
		if got := PagesFor(tc.tokens, tc.size); got != tc.want {
			t.Errorf("PagesFor(%d,%d)=%d want %d", tc.tokens, tc.size, got, tc.want)
		}
	}
}

func TestCapacity(t *testing.T) {
	info := kernels.ModelInfo{Name: "m", ModelKVBytesPerToken: 131072}
	tests := []struct {
		name    string
		cfg     CapacityConfig
		info    kernels.ModelInfo
		want    int
		wantErr bool
	}{
		{"max total tokens", CapacityConfig{MaxTotalTokens: 4096, PageSize: 16}, info, 256, false},
		{"max total tokens rounds down", CapacityConfig{MaxTotalTokens: 4100, PageSize: 16}, info, 256, false},
		{"max total tokens below a page", CapacityConfig{MaxTotalTokens: 8, PageSize: 16}, info, 0, true},
		// 0.83 × 80 GiB / 128 KiB per token / 16 = 33996 pages.
		{"mem fraction", CapacityConfig{MemFractionStatic: 0.83, DeviceMemoryGB: 80, PageSize: 16}, info, 33996, false},
		{"mem fraction too small", CapacityConfig{MemFractionStatic: 0.01, DeviceMemoryGB: 0.0001, PageSize: 16}, info, 0, true},
		{"no device memory", CapacityConfig{MemFractionStatic: 0.83, PageSize: 16}, info, 0, true},
		// The range of --mem-fraction-static is scheduler.Limits.Validate's to check.
		{"bad page size", CapacityConfig{MaxTotalTokens: 100}, info, 0, true},
		{"zero kv bytes", CapacityConfig{MemFractionStatic: 0.5, DeviceMemoryGB: 1, PageSize: 16}, kernels.ModelInfo{}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Capacity(tc.cfg, tc.info)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTransfer(t *testing.T) {
	p := New(4)
	pages, ok := p.Alloc(1, 3)
	require.True(t, ok)
	require.NoError(t, p.Transfer(1, 9, pages[:2]))
	assert.Equal(t, 1, p.Held(1))
	assert.Equal(t, 2, p.Held(9))
	assert.Equal(t, Owner(9), p.OwnerOf(pages[0]))
	assert.ErrorIs(t, p.Transfer(1, 9, pages[:1]), ErrNotOwner, "no longer 1's")
	assert.ErrorIs(t, p.Transfer(9, 0, pages[:1]), ErrNotOwner, "0 is the free owner")
	require.NoError(t, p.Free(9, pages[:2]))
	assert.Equal(t, 3, p.FreePages())
}
