package kernels

import (
	"math"
	"strings"
	"testing"

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
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "kernels: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if _, derr := Describe(cfg); derr == nil {
				t.Errorf("Describe accepted an invalid config")
			}
			if _, nerr := New(cfg); nerr == nil {
				t.Errorf("New accepted an invalid config")
			}
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
			if info.KVBytesPerTokenPerLayer != tt.perLayer || info.ModelKVBytesPerToken != tt.modelPerToken {
				t.Fatalf("Describe = %+v, want per-layer %d, model per token %d", info, tt.perLayer, tt.modelPerToken)
			}
			if info.Name != "ref" || info.BOS != TokenBOS || info.EOS != TokenEOS || info.VocabSize != cfg.Vocab || info.Layers != cfg.Layers {
				t.Fatalf("Describe = %+v", info)
			}
			cfg.NumPages = 8
			b, err := New(cfg)
			require.NoError(t, err)
			if b.Info() != info {
				t.Fatalf("New().Info() = %+v, Describe = %+v", b.Info(), info)
			}
			kv := b.KV()
			if kv.NumPages != 8 || kv.PageSize != cfg.PageSize || kv.Layers != cfg.Layers || kv.BytesPerToken != info.KVBytesPerTokenPerLayer {
				t.Fatalf("KV store %+v does not match config", kv)
			}
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
	if allocs != 0 {
		t.Fatalf("Describe allocated %v times", allocs)
	}
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), "GiB limit") {
		t.Fatalf("New with 2^31-1 pages = %v, want the size limit error", err)
	}
	cfg.NumPages = 0
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "NumPages") {
		t.Fatalf("New with 0 pages = %v, want a NumPages error", err)
	}
}
