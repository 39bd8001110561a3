package kernels

import (
	"fmt"
	"time"
	"unsafe"
)

// ModelInfo describes what a backend computes and how big its KV cache is.
type ModelInfo struct {
	// Name is the model id served on /v1/models (for example "ref").
	Name string
	// VocabSize is the number of token ids; ids are in [0, VocabSize).
	VocabSize int
	// BOS and EOS are the special token ids of the tokenizer.
	BOS, EOS int
	// Layers is the number of transformer layers; KV frames are sent per layer.
	Layers int
	// KVBytesPerTokenPerLayer is the size of one token's K and V for one layer as stored
	// in this process's KVStore (real bytes moved by the PD transfer).
	KVBytesPerTokenPerLayer int
	// ModelKVBytesPerToken is the KV footprint per token of the model being modelled
	// (all layers). For tinyref it equals Layers*KVBytesPerTokenPerLayer; for simtime it
	// is the real model's (e.g. 131072 for Llama-3-8B in bf16). Pool capacity from
	// --mem-fraction-static uses this number.
	ModelKVBytesPerToken int64
}

// Sampling holds the per-request sampling parameters. The random draw for the token at
// position p depends only on (Seed, p), never on the batch, so PD and colocated agree.
type Sampling struct {
	Temperature float64 // 0 means greedy
	TopP        float64 // 0 or 1 means no nucleus cut
	Seed        uint64
}

// SeqInput is one request's share of a forward step.
type SeqInput struct {
	// Tokens are the new tokens to run; Tokens[i] sits at position Pos+i.
	Tokens []int
	// Pos is the position of Tokens[0] (the number of tokens whose KV is already cached).
	Pos int
	// Pages is the request's page table: Pages[j] holds positions
	// [j*PageSize, (j+1)*PageSize). It must cover every position up to Pos+len(Tokens)-1.
	Pages []int32
	// Sample asks for the next token after the last of Tokens. False for a chunk of a
	// chunked prefill that is not the last one.
	Sample   bool
	Sampling Sampling
}

// Backend computes forward steps over a paged KV cache. Implementations are not safe for
// concurrent use: one driver goroutine owns a backend.
type Backend interface {
	Info() ModelInfo
	// KV is the paged cache this backend reads and writes.
	KV() *KVStore
	// Forward runs one step over the batch: it writes the K/V of every input token into
	// the cache and, for each sequence with Sample set, stores the sampled next token in
	// out[i] (out[i] is -1 otherwise). len(out) == len(batch).
	Forward(batch []SeqInput, out []int) error
	// StepTime is the modelled device time of a step with these token counts. The driver
	// waits until it has passed (paced, simtime); tinyref returns 0.
	StepTime(prefillTokens, decodeTokens int) time.Duration
}

// KVStore is the paged KV memory: NumPages pages of PageSize tokens, each page laid out
// layer-major so that one (page, layer) slice is contiguous and can be sent as one frame.
type KVStore struct {
	NumPages      int
	PageSize      int
	Layers        int
	BytesPerToken int // per layer
	data          []float32
}

// NewKVStore allocates the cache. bytesPerTokenPerLayer must be a multiple of 4.
func NewKVStore(numPages, pageSize, layers, bytesPerTokenPerLayer int) (*KVStore, error) {
	if numPages <= 0 || pageSize <= 0 || layers <= 0 || bytesPerTokenPerLayer <= 0 || bytesPerTokenPerLayer%4 != 0 {
		return nil, fmt.Errorf("kernels: bad KV store shape pages=%d page_size=%d layers=%d bytes=%d",
			numPages, pageSize, layers, bytesPerTokenPerLayer)
	}
	n := numPages * pageSize * layers * bytesPerTokenPerLayer / 4
	return &KVStore{NumPages: numPages, PageSize: pageSize, Layers: layers,
		BytesPerToken: bytesPerTokenPerLayer, data: make([]float32, n)}, nil
}

// LayerFloats returns the float32 view of one (page, layer): PageSize tokens, each
// BytesPerToken/4 floats.
func (s *KVStore) LayerFloats(page int32, layer int) []float32 {
	per := s.PageSize * s.BytesPerToken / 4
	off := (int(page)*s.Layers + layer) * per
	return s.data[off : off+per : off+per]
}

// LayerBytes returns the same memory as LayerFloats as bytes (native little-endian), for
// transfer and checksums. Writes through it change the cache.
func (s *KVStore) LayerBytes(page int32, layer int) []byte {
	f := s.LayerFloats(page, layer)
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}
