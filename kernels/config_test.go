package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none means valid
	}{
		{"default", func(c *Config) {}, nil},
		{"simtime default", func(c *Config) { c.Backend = BackendSimTime }, nil},
		{"paced default", func(c *Config) { c.Backend = BackendPaced }, nil},
		{"unknown backend", func(c *Config) { c.Backend = "cuda" }, []string{`Backend "cuda"`, "tinyref, simtime, paced"}},
		{"empty model", func(c *Config) { c.Model = "" }, []string{"Model"}},
		{"zero dim", func(c *Config) { c.Dim = 0 }, []string{"Dim must be > 0"}},
		{"dim not multiple of heads", func(c *Config) { c.Dim = 130 }, []string{"Dim (130) must be a multiple of Heads (4)"}},
		{"odd head size", func(c *Config) { c.Dim = 12; c.Heads = 4 }, []string{"even head size"}},
		{"heads not multiple of kv heads", func(c *Config) { c.KVHeads = 3 }, []string{"Heads (4) must be a multiple of KVHeads (3)"}},
		{"zero kv heads", func(c *Config) { c.KVHeads = 0 }, []string{"KVHeads must be > 0"}},
		{"zero heads", func(c *Config) { c.Heads = 0 }, []string{"Heads must be > 0"}},
		{"zero layers", func(c *Config) { c.Layers = 0 }, []string{"Layers must be > 0"}},
		{"zero ffn", func(c *Config) { c.FFN = 0 }, []string{"FFN must be > 0"}},
		{"small vocab", func(c *Config) { c.Vocab = 257 }, []string{"Vocab must be >= 258"}},
		{"zero page size", func(c *Config) { c.PageSize = 0 }, []string{"PageSize must be > 0"}},
		{"unknown profile", func(c *Config) { c.Backend = BackendSimTime; c.Profile = "gpt5-tpu" },
			[]string{`Profile: kernels: unknown profile "gpt5-tpu"`, "llama3-8b-h100", "tiny-cpu"}},
		{"profile ignored by tinyref", func(c *Config) { c.Profile = "nope" }, nil},
		{"negative jitter", func(c *Config) { c.Backend = BackendPaced; c.Jitter = -0.1 }, []string{"Jitter must be in [0, 1)"}},
		{"sim kv not multiple of 8", func(c *Config) { c.Backend = BackendSimTime; c.SimKVBytesPerTokenPerLayer = 12 },
			[]string{"SimKVBytesPerTokenPerLayer must be a positive multiple of 8"}},
		{"simtime ignores dims", func(c *Config) { c.Backend = BackendSimTime; c.Dim = 0; c.Heads = 0 }, nil},
		{"every problem at once", func(c *Config) { c.Dim = 0; c.Layers = 0; c.FFN = -1 },
			[]string{"Dim must be > 0", "Layers must be > 0", "FFN must be > 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			err := cfg.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "kernels: "), "error %q lacks the package prefix", err)
			_, derr := Describe(cfg)
			assert.Error(t, derr, "Describe accepted an invalid config")
			_, nerr := New(cfg)
			assert.Error(t, nerr, "New accepted an invalid config")
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name          string
		edit          func(*Config)
		perLayer      int
		modelPerToken int64
	}{
		{"tinyref", func(c *Config) {}, 2 * 2 * 32 * 4, 2 * 2 * 2 * 32 * 4},
		{"simtime llama3-8b", func(c *Config) { c.Backend = BackendSimTime }, 64, 131072},
		{"simtime 70b", func(c *Config) { c.Backend = BackendSimTime; c.Profile = "llama3-70b-h100x4" }, 64, 327680},
		{"paced uses profile footprint", func(c *Config) { c.Backend = BackendPaced; c.Profile = "tiny-cpu" }, 512, 1024},
		{"tinyref 3 layers", func(c *Config) { c.Layers = 3; c.KVHeads = 4 }, 2 * 4 * 32 * 4, 3 * 2 * 4 * 32 * 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.edit(&cfg)
			info, err := Describe(cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.perLayer, info.KVBytesPerTokenPerLayer, "KV bytes per token per layer")
			assert.Equal(t, tt.modelPerToken, info.ModelKVBytesPerToken, "model KV bytes per token")
			assert.Equal(t, "ref", info.Name)
			assert.Equal(t, TokenBOS, info.BOS)
			assert.Equal(t, TokenEOS, info.EOS)
			assert.Equal(t, cfg.Vocab, info.VocabSize)
			assert.Equal(t, cfg.Layers, info.Layers)
			cfg.NumPages = 8
			b, err := New(cfg)
			require.NoError(t, err)
			require.Equal(t, info, b.Info(), "New().Info() and Describe")
			kv := b.KV()
			assert.Equal(t, 8, kv.NumPages)
			assert.Equal(t, cfg.PageSize, kv.PageSize)
			assert.Equal(t, cfg.Layers, kv.Layers)
			assert.Equal(t, info.KVBytesPerTokenPerLayer, kv.BytesPerToken)
		})
	}
}

func TestDescribeDoesNotAllocateThePool(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NumPages = math.MaxInt32 // far beyond memory: Describe must not care
	if _, err := Describe(cfg); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := Describe(cfg); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "Describe allocated")
	_, err := New(cfg)
	require.ErrorContains(t, err, "GiB limit", "New with 2^31-1 pages")
	cfg.NumPages = 0
	_, err = New(cfg)
	require.ErrorContains(t, err, "NumPages", "New with 0 pages")
}
