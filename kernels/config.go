package kernels

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Backend names accepted in Config.Backend.
const (
	BackendTinyRef = "tinyref"
	BackendSimTime = "simtime"
	BackendPaced   = "paced"
)

// Backends lists the valid values of Config.Backend.
func Backends() []string { return []string{BackendTinyRef, BackendSimTime, BackendPaced} }

// Config selects and sizes a backend. Start from DefaultConfig and change fields; New
// validates the result and reports every problem at once.
type Config struct {
	// Backend is "tinyref", "simtime" or "paced".
	Backend string
	// Model is the model id reported in ModelInfo.Name (served on /v1/models).
	Model string
	// Seed generates tinyref's weights and simtime's jitter.
	Seed uint64

	// Transformer shape (tinyref and paced compute; Layers also shapes simtime's store).
	Dim     int // model width
	Layers  int // transformer layers (one KV frame per layer per page)
	Heads   int // query heads; Dim must be a multiple of Heads and Dim/Heads even (RoPE)
	KVHeads int // key/value heads (grouped-query attention); Heads must be a multiple
	FFN     int // SwiGLU hidden width
	Vocab   int // token ids: 256 bytes, BOS, EOS, then padding ids that are never produced

	// Paged KV cache.
	PageSize int // tokens per page
	NumPages int // pages allocated by New

	// Profile names the simtime timing profile (simtime and paced); see Profiles.
	Profile string
	// SimKVBytesPerTokenPerLayer is how many real bytes simtime stores per token per
	// layer (a multiple of 8). The modelled footprint comes from the profile instead.
	SimKVBytesPerTokenPerLayer int
	// Jitter is the relative amplitude of simtime's seeded step-time jitter, in [0, 1).
	Jitter float64
	// Slowdown makes every simtime step this much slower (0.1: 10%), on top of the
	// profile: a server with a known regression, for calibrating compare's gate.
	Slowdown float64
}

// Default sizes: small enough that tinyref decodes 30 sequences at tens of steps per
// second on one CPU core.
const (
	DefaultModel    = "ref"
	DefaultDim      = 128
	DefaultLayers   = 2
	DefaultHeads    = 4
	DefaultKVHeads  = 2
	DefaultFFN      = 384
	DefaultVocab    = 264 // 256 bytes + BOS + EOS, padded to a multiple of 8
	DefaultPageSize = 16
	DefaultNumPages = 4096
	DefaultProfile  = "llama3-8b-h100"
	DefaultSimKV    = 64
	DefaultJitter   = 0.02
)

// DefaultConfig returns the tinyref configuration used by `pdserver` when no flag
// overrides it.
func DefaultConfig() Config {
	return Config{
		Backend:                    BackendTinyRef,
		Model:                      DefaultModel,
		Seed:                       1,
		Dim:                        DefaultDim,
		Layers:                     DefaultLayers,
		Heads:                      DefaultHeads,
		KVHeads:                    DefaultKVHeads,
		FFN:                        DefaultFFN,
		Vocab:                      DefaultVocab,
		PageSize:                   DefaultPageSize,
		NumPages:                   DefaultNumPages,
		Profile:                    DefaultProfile,
		SimKVBytesPerTokenPerLayer: DefaultSimKV,
		Jitter:                     DefaultJitter,
	}
}

// maxKVStoreBytes bounds what New will allocate, so a typo in a flag fails fast instead
// of exhausting memory.
const maxKVStoreBytes = 8 << 30

// Validate reports every problem of the configuration at once, each naming its field.
// It does not look at NumPages (Describe works before the pool is sized); New does.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kernels: config: "+format, args...))
	}
	switch c.Backend {
	case BackendTinyRef, BackendSimTime, BackendPaced:
	default:
		bad("Backend %q is unknown (valid: %s)", c.Backend, strings.Join(Backends(), ", "))
	}
	if c.Model == "" {
		bad("Model must not be empty")
	}
	if c.Layers <= 0 {
		bad("Layers must be > 0 (got %d)", c.Layers)
	}
	if c.PageSize <= 0 {
		bad("PageSize must be > 0 (got %d)", c.PageSize)
	}
	if c.Backend == BackendTinyRef || c.Backend == BackendPaced {
		if c.Dim <= 0 {
			bad("Dim must be > 0 (got %d)", c.Dim)
		}
		if c.Heads <= 0 {
			bad("Heads must be > 0 (got %d)", c.Heads)
		} else if c.Dim > 0 && (c.Dim%c.Heads != 0 || (c.Dim/c.Heads)%2 != 0) {
			bad("Dim (%d) must be a multiple of Heads (%d) with an even head size", c.Dim, c.Heads)
		}
		if c.KVHeads <= 0 {
			bad("KVHeads must be > 0 (got %d)", c.KVHeads)
		} else if c.Heads > 0 && c.Heads%c.KVHeads != 0 {
			bad("Heads (%d) must be a multiple of KVHeads (%d)", c.Heads, c.KVHeads)
		}
		if c.FFN <= 0 {
			bad("FFN must be > 0 (got %d)", c.FFN)
		}
	}
	if c.Vocab < NumByteTokens+2 {
		bad("Vocab must be >= %d (256 bytes + BOS + EOS) (got %d)", NumByteTokens+2, c.Vocab)
	}
	if c.Backend == BackendSimTime || c.Backend == BackendPaced {
		if _, err := LookupProfile(c.Profile); err != nil {
			errs = append(errs, fmt.Errorf("kernels: config: Profile: %w", err))
		}
		if c.Jitter < 0 || c.Jitter >= 1 || math.IsNaN(c.Jitter) {
			bad("Jitter must be in [0, 1) (got %v)", c.Jitter)
		}
		if c.Slowdown < 0 || c.Slowdown > 10 || math.IsNaN(c.Slowdown) {
			bad("Slowdown must be in [0, 10] (got %v)", c.Slowdown)
		}
	}
	if c.Backend == BackendSimTime {
		if c.SimKVBytesPerTokenPerLayer <= 0 || c.SimKVBytesPerTokenPerLayer%8 != 0 {
			bad("SimKVBytesPerTokenPerLayer must be a positive multiple of 8 (got %d)", c.SimKVBytesPerTokenPerLayer)
		}
	}
	return errors.Join(errs...)
}

// kvBytesPerTokenPerLayer is the real size of one token's K and V for one layer in the
// KVStore of this configuration. Only meaningful for a valid config.
func (c Config) kvBytesPerTokenPerLayer() int {
	if c.Backend == BackendSimTime {
		return c.SimKVBytesPerTokenPerLayer
	}
	headDim := c.Dim / c.Heads
	return 2 * c.KVHeads * headDim * 4
}

// Describe returns the ModelInfo of the backend New would build, without allocating
// anything: the server sizes the KV pool from ModelKVBytesPerToken before calling New.
func Describe(cfg Config) (ModelInfo, error) {
	if err := cfg.Validate(); err != nil {
		return ModelInfo{}, err
	}
	info := ModelInfo{
		Name:                    cfg.Model,
		VocabSize:               cfg.Vocab,
		BOS:                     TokenBOS,
		EOS:                     TokenEOS,
		Layers:                  cfg.Layers,
		KVBytesPerTokenPerLayer: cfg.kvBytesPerTokenPerLayer(),
	}
	switch cfg.Backend {
	case BackendTinyRef:
		info.ModelKVBytesPerToken = int64(cfg.Layers) * int64(info.KVBytesPerTokenPerLayer)
	default:
		p, _ := LookupProfile(cfg.Profile)
		info.ModelKVBytesPerToken = p.ModelKVBytesPerToken
	}
	return info, nil
}

// New validates cfg and builds the backend with a KVStore of NumPages × PageSize tokens.
func New(cfg Config) (Backend, error) {
	info, err := Describe(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.NumPages <= 0 {
		return nil, fmt.Errorf("kernels: config: NumPages must be > 0 (got %d)", cfg.NumPages)
	}
	total := float64(cfg.NumPages) * float64(cfg.PageSize) * float64(cfg.Layers) * float64(info.KVBytesPerTokenPerLayer)
	if total > maxKVStoreBytes || total >= float64(math.MaxInt) {
		return nil, fmt.Errorf("kernels: config: KV store of NumPages=%d × PageSize=%d × Layers=%d × %d bytes is %.1f GiB, over the %d GiB limit",
			cfg.NumPages, cfg.PageSize, cfg.Layers, info.KVBytesPerTokenPerLayer, total/(1<<30), maxKVStoreBytes>>30)
	}
	kv, err := NewKVStore(cfg.NumPages, cfg.PageSize, cfg.Layers, info.KVBytesPerTokenPerLayer)
	if err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case BackendTinyRef:
		return newTinyRef(cfg, info, kv), nil
	case BackendSimTime:
		p, _ := LookupProfile(cfg.Profile)
		return newSimTime(cfg, info, kv, p), nil
	default: // paced
		p, _ := LookupProfile(cfg.Profile)
		return &Paced{TinyRef: newTinyRef(cfg, info, kv), clock: newStepClock(cfg, p)}, nil
	}
}
