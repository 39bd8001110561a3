package kernels

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSim(t testing.TB, edit func(*Config)) *SimTime {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Backend = BackendSimTime
	cfg.NumPages = 64
	if edit != nil {
		edit(&cfg)
	}
	b, err := New(cfg)
	require.NoError(t, err)
	return b.(*SimTime)
}

func TestProfileStepTime(t *testing.T) {
	p, err := LookupProfile("llama3-8b-h100")
	require.NoError(t, err)
	require.Positive(t, p.BetaCompute)
	// Token counts at which the compute roofline overtakes the memory-bound floor.
	knee := int(p.Beta0 / p.BetaCompute)
	tests := []struct {
		name            string
		prefill, decode int
		want            time.Duration
	}{
		{"idle step costs nothing", 0, 0, 0},
		{"one decode token", 0, 1, p.Beta0 + p.Beta2},
		{"decode batch of 30", 0, 30, p.Beta0 + 30*p.Beta2},
		{"prefill below the knee", 256, 0, p.Beta0 + 256*p.Beta1},
		{"prefill past the knee is compute-bound", knee + 100, 0,
			time.Duration(knee+100) * (p.BetaCompute + p.Beta1)},
		{"mixed below the knee", 100, 8, p.Beta0 + 100*p.Beta1 + 8*p.Beta2},
		{"mixed past the knee counts every token", knee, 50,
			time.Duration(knee+50)*p.BetaCompute + time.Duration(knee)*p.Beta1 + 50*p.Beta2},
		{"negative counts are zero", -5, 1, p.Beta0 + p.Beta2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.StepTime(tt.prefill, tt.decode); got != tt.want {
				t.Fatalf("StepTime(%d, %d) = %v, want %v", tt.prefill, tt.decode, got, tt.want)
			}
			s := newSim(t, func(c *Config) { c.Jitter = 0 })
			if got := s.StepTime(tt.prefill, tt.decode); got != tt.want {
				t.Fatalf("simtime without jitter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStepTimeJitter(t *testing.T) {
	p, _ := LookupProfile("llama3-8b-h100")
	base := p.StepTime(10, 20)
	a := newSim(t, func(c *Config) { c.Jitter = 0.1 })
	b := newSim(t, func(c *Config) { c.Jitter = 0.1 })
	other := newSim(t, func(c *Config) { c.Jitter = 0.1; c.Seed = 99 })
	var sa, sb, so []time.Duration
	for range 200 {
		sa = append(sa, a.StepTime(10, 20))
		sb = append(sb, b.StepTime(10, 20))
		so = append(so, other.StepTime(10, 20))
		if a.StepTime(0, 0) != 0 {
			t.Fatal("an idle step must not take time")
		}
	}
	if !slices.Equal(sa, sb) {
		t.Fatal("same seed gave different jitter")
	}
	if slices.Equal(sa, so) {
		t.Fatal("different seeds gave the same jitter")
	}
	lo, hi := time.Duration(float64(base)*0.9), time.Duration(float64(base)*1.1)
	distinct := map[time.Duration]bool{}
	for _, d := range sa {
		if d < lo || d > hi {
			t.Fatalf("jittered step %v outside [%v, %v]", d, lo, hi)
		}
		distinct[d] = true
	}
	if len(distinct) < 100 {
		t.Fatalf("only %d distinct step times in 200", len(distinct))
	}
}

func TestProfileStepTimeWithoutComputeTerm(t *testing.T) {
	p, err := LookupProfile("qwen2.5-7b-l40s")
	require.NoError(t, err)
	require.Zero(t, p.BetaCompute)
	for _, n := range []int{1, 512, 100000} {
		assert.Equal(t, p.Beta0+time.Duration(n)*p.Beta1+3*p.Beta2, p.StepTime(n, 3), "prefill %d", n)
	}
}

func TestProfiles(t *testing.T) {
	ps := Profiles()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
		zero := p.Name == ZeroProfile && p.Beta0 == 0 && p.Beta1 == 0 && p.Beta2 == 0
		if (!zero && (p.Beta0 <= 0 || p.Beta1 <= 0 || p.Beta2 <= 0)) || p.ModelKVBytesPerToken <= 0 || p.Description == "" {
			t.Errorf("profile %+v has a zero field", p)
		}
		got, err := LookupProfile(p.Name)
		if err != nil || got != p {
			t.Errorf("LookupProfile(%q) = %+v, %v", p.Name, got, err)
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("Profiles not sorted: %v", names)
	}
	for _, want := range []string{"llama3-8b-a100", "llama3-8b-h100", "llama3-70b-a100x4", "llama3-70b-h100x4", "qwen2.5-7b-l40s", "tiny-cpu", "zero"} {
		if !slices.Contains(names, want) {
			t.Errorf("missing profile %q", want)
		}
	}
	if p, _ := LookupProfile("llama3-8b-h100"); p.ModelKVBytesPerToken != 131072 {
		t.Errorf("llama3-8b-h100 KV bytes per token = %d, want 131072", p.ModelKVBytesPerToken)
	}
	_, err := LookupProfile("h100")
	if err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Fatalf("unknown profile error %v does not list %v", err, names)
	}
}

func TestSimTimeForward(t *testing.T) {
	prompt := promptIDs(4, 50)
	pages := pagesFor(2, 20)
	a := newSim(t, nil)
	b := newSim(t, nil)
	ga := generate(t, a, prompt, pages, Sampling{}, 200)
	gb := generate(t, b, prompt, pages, Sampling{}, 200)
	if !slices.Equal(ga, gb) {
		t.Fatal("simtime is not deterministic")
	}
	for _, id := range ga {
		if id != TokenEOS && id != '\n' && (id < ' ' || id > '~') {
			t.Fatalf("simtime produced id %d", id)
		}
	}
	// The KV bytes are a function of (token, position, layer) only.
	c := newSim(t, nil)
	require.NoError(t, c.Forward([]SeqInput{{Tokens: prompt, Pages: pagesFor(30, 20)}}, []int{0}))
	if string(seqKV(a.KV(), pages, 50)) != string(seqKV(c.KV(), pagesFor(30, 20), 50)) {
		t.Fatal("prompt KV bytes depend on the pages they sit in")
	}
	// Sampling: the seed changes the output; the same seed repeats it.
	s1 := generate(t, newSim(t, nil), prompt, pages, Sampling{Temperature: 1, Seed: 1}, 40)
	s1b := generate(t, newSim(t, nil), prompt, pages, Sampling{Temperature: 1, Seed: 1}, 40)
	s2 := generate(t, newSim(t, nil), prompt, pages, Sampling{Temperature: 1, Seed: 2}, 40)
	if !slices.Equal(s1, s1b) || slices.Equal(s1, s2) {
		t.Fatalf("seeded sampling: %v %v %v", s1, s1b, s2)
	}
}

// TestSimTimeDetectsCorruptKV flips one byte of a prompt page, as a broken transfer would,
// and requires the next tokens to change for most choices of byte.
func TestSimTimeDetectsCorruptKV(t *testing.T) {
	prompt := promptIDs(5, 64)
	pages := pagesFor(0, 4)
	s := newSim(t, nil)
	out := []int{0}
	require.NoError(t, s.Forward([]SeqInput{{Tokens: prompt, Pages: pages}}, out))
	// next decodes four tokens after the prompt (writing positions 64..67).
	next := func() [4]int {
		var got [4]int
		tok := int('x')
		for k := range got {
			require.NoError(t, s.Forward([]SeqInput{{Tokens: []int{tok}, Pos: 64 + k, Pages: []int32{0, 1, 2, 3, 4}, Sample: true}}, out))
			got[k], tok = out[0], out[0]
		}
		return got
	}
	clean := next()
	changed := 0
	const trials = 40
	for i := range trials {
		page := int32(i % 4)
		layer := i % s.KV().Layers
		b := s.KV().LayerBytes(page, layer)
		off := (i * 37) % len(b)
		b[off] ^= 0x10
		if next() != clean {
			changed++
		}
		b[off] ^= 0x10
	}
	if changed < trials*3/4 {
		t.Fatalf("a corrupted byte changed the next tokens in only %d of %d cases", changed, trials)
	}
	if next() != clean {
		t.Fatal("restoring the bytes did not restore the tokens")
	}
}

func TestPaced(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Backend = BackendPaced
	cfg.Profile = "tiny-cpu"
	cfg.Jitter = 0
	cfg.NumPages = 64
	b, err := New(cfg)
	require.NoError(t, err)
	p, _ := LookupProfile("tiny-cpu")
	if got := b.StepTime(3, 4); got != p.StepTime(3, 4) {
		t.Fatalf("paced StepTime = %v, want %v", got, p.StepTime(3, 4))
	}
	if b.Info().ModelKVBytesPerToken != p.ModelKVBytesPerToken {
		t.Fatalf("paced footprint %d, want the profile's %d", b.Info().ModelKVBytesPerToken, p.ModelKVBytesPerToken)
	}
	ref := newTiny(t, func(c *Config) { c.NumPages = 64 })
	prompt := promptIDs(6, 33)
	if g, w := generate(t, b, prompt, pagesFor(0, 8), Sampling{}, 30), generate(t, ref, prompt, pagesFor(0, 8), Sampling{}, 30); !slices.Equal(g, w) {
		t.Fatalf("paced tokens %v differ from tinyref %v", g, w)
	}
	if ref.StepTime(100, 100) != 0 {
		t.Fatal("tinyref StepTime must be 0")
	}
}

func TestKVStoreLayout(t *testing.T) {
	kv, err := NewKVStore(3, 4, 2, 16)
	require.NoError(t, err)
	seen := map[*float32]string{}
	for p := int32(0); p < 3; p++ {
		for l := 0; l < 2; l++ {
			f := kv.LayerFloats(p, l)
			if len(f) != 4*16/4 || cap(f) != len(f) {
				t.Fatalf("LayerFloats(%d,%d) len %d cap %d", p, l, len(f), cap(f))
			}
			for i := range f {
				if prev, dup := seen[&f[i]]; dup {
					t.Fatalf("(%d,%d)[%d] overlaps %s", p, l, i, prev)
				}
				seen[&f[i]] = "earlier slice"
				f[i] = float32(int(p)*100 + l*10 + i)
			}
			b := kv.LayerBytes(p, l)
			if len(b) != 4*16 {
				t.Fatalf("LayerBytes len %d", len(b))
			}
		}
	}
	if len(seen) != 3*2*4*4 {
		t.Fatalf("covered %d floats", len(seen))
	}
	// Writes through the bytes view change the floats (little-endian float32).
	b := kv.LayerBytes(1, 1)
	copy(b[4:8], []byte{0, 0, 0x80, 0x3f}) // 1.0
	if got := kv.LayerFloats(1, 1)[1]; got != 1 {
		t.Fatalf("float after byte write = %v", got)
	}
	for _, bad := range [][4]int{{0, 4, 2, 16}, {3, 0, 2, 16}, {3, 4, 0, 16}, {3, 4, 2, 6}} {
		if _, err := NewKVStore(bad[0], bad[1], bad[2], bad[3]); err == nil {
			t.Errorf("NewKVStore%v accepted", bad)
		}
	}
}

func TestSimTimeBatchInvariance(t *testing.T) {
	const n = 8
	want := make([][]int, n)
	for i := range n {
		want[i] = generate(t, newSim(t, nil), promptIDs(i, 10+5*i), pagesFor(i*6, 6), Sampling{Temperature: float64(i % 2), Seed: 3}, 20)
	}
	s := newSim(t, nil)
	batch := make([]SeqInput, n)
	for i := range batch {
		batch[i] = SeqInput{Tokens: promptIDs(i, 10+5*i), Pages: pagesFor(i*6, 6), Sample: true, Sampling: Sampling{Temperature: float64(i % 2), Seed: 3}}
	}
	got := make([][]int, n)
	out := make([]int, n)
	for range 20 {
		require.NoError(t, s.Forward(batch, out))
		for i := range batch {
			got[i] = append(got[i], out[i])
			batch[i].Pos += len(batch[i].Tokens)
			batch[i].Tokens = []int{out[i]}
		}
	}
	for i := range n {
		if g := got[i][:len(want[i])]; !slices.Equal(g, want[i]) {
			t.Fatalf("seq %d: batched %v, alone %v", i, g, want[i])
		}
	}
}

func TestZeroProfileStepsTakeNoTime(t *testing.T) {
	s := newSim(t, func(c *Config) { c.Profile = ZeroProfile; c.Jitter = 0.5 })
	for _, n := range [][2]int{{0, 0}, {512, 0}, {0, 256}, {100, 8}} {
		require.Zero(t, s.StepTime(n[0], n[1]), "StepTime(%d, %d)", n[0], n[1])
	}
}
