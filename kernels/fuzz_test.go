package kernels

import (
	"encoding/binary"
	"testing"
)

// FuzzForward feeds arbitrary batches (token ids, positions and page tables, as a worker
// might receive them over the wire) to every backend: each call must either return an
// error or fill out with valid tokens, and never panic.
func FuzzForward(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 3, 'h', 'i', '!', 0, 1})
	f.Add([]byte{2, 5, 0, 0, 1, 0x10, 1, 2, 1, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 1, 'a', 1, 0})
	backends := map[string]Backend{}
	for _, name := range Backends() {
		cfg := DefaultConfig()
		cfg.Backend = name
		cfg.NumPages = 8
		cfg.PageSize = 4
		b, err := New(cfg)
		if err != nil {
			f.Fatal(err)
		}
		backends[name] = b
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		batch := decodeFuzzBatch(data)
		for name, b := range backends {
			out := make([]int, len(batch))
			if err := b.Forward(batch, out); err != nil {
				continue
			}
			for i, s := range batch {
				if s.Sample && (out[i] < 0 || out[i] >= TokenBOS && out[i] != TokenEOS) {
					t.Fatalf("%s: seq %d sampled %d", name, i, out[i])
				}
				if !s.Sample && out[i] != -1 {
					t.Fatalf("%s: seq %d not sampled but out = %d", name, i, out[i])
				}
			}
		}
	})
}

// decodeFuzzBatch reads: count, then per sequence pos (2 bytes, signed), flags, token
// count and tokens (2 bytes each, may be out of range), page count and pages (1 byte,
// signed).
func decodeFuzzBatch(data []byte) []SeqInput {
	next := func(n int) []byte {
		if len(data) < n {
			data = append(data, make([]byte, n-len(data))...)
		}
		b := data[:n]
		data = data[n:]
		return b
	}
	count := int(next(1)[0] % 5)
	batch := make([]SeqInput, count)
	for i := range batch {
		s := &batch[i]
		s.Pos = int(int16(binary.LittleEndian.Uint16(next(2))))
		flags := next(1)[0]
		s.Sample = flags&1 != 0
		if flags&2 != 0 {
			s.Sampling = Sampling{Temperature: float64(flags>>2) / 8, TopP: float64(flags>>4) / 15, Seed: uint64(flags)}
		}
		nt := int(next(1)[0] % 40)
		for range nt {
			s.Tokens = append(s.Tokens, int(int16(binary.LittleEndian.Uint16(next(2))))%300)
		}
		np := int(next(1)[0] % 12)
		for range np {
			s.Pages = append(s.Pages, int32(int8(next(1)[0])))
		}
	}
	return batch
}
