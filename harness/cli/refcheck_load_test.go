package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/scenarios"
)

// k8s render and explore load scenarios with the same reference-flag check as validate
// and run: a flag the reference server refuses is exit 2 naming the field, before any
// manifest is written or any simulated run starts.
func TestRenderAndExploreCheckReferenceFlags(t *testing.T) {
	const bad = "--max-totl-tokens=4096"
	const want = "reference.decode_args: the reference server refuses these flags: unknown flag: --max-totl-tokens"

	t.Run("k8s render", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.yaml")
		require.NoError(t, os.WriteFile(p, []byte("name: x\nduration: 10s\nreference: {prefill: 1, decode: 1, decode_args: ["+bad+"]}\nworkloads:\n  - {name: a, type: agents}\n"), 0o644))
		code, out, stderr := execute(t, []string{"k8s", "render", p, "--shards", "2", "--image", "pdsoak:dev"})
		assert.Equal(t, ExitUsage, code, stderr)
		assert.Contains(t, stderr, want)
		assert.Empty(t, out, "no manifest for a scenario the server refuses")
	})
	t.Run("explore", func(t *testing.T) {
		text := strings.Replace(fmt.Sprintf(exploreScenario, "512, 65536"), "  semantics: sglang\n", "  semantics: sglang\n  decode_args: ["+bad+"]\n", 1)
		path := writeScenario(t, text)
		var stdout, stderr bytes.Buffer
		ran := false
		code := Execute(context.Background(), []string{"explore", path, "--out", t.TempDir()}, &stdout, &stderr,
			WithExploreRunner(func(context.Context, *scenarios.Scenario, string) error { ran = true; return nil }))
		assert.Equal(t, ExitUsage, code, stderr.String())
		assert.Contains(t, stderr.String(), want)
		assert.False(t, ran, "nothing ran")
	})
	// The same files without the bad flag are accepted (the check is not refusing all).
	p := filepath.Join(t.TempDir(), "ok.yaml")
	require.NoError(t, os.WriteFile(p, []byte("name: x\nduration: 10s\nreference: {prefill: 1, decode: 1, decode_args: [--max-total-tokens=4096]}\nworkloads:\n  - {name: a, type: agents}\n"), 0o644))
	code, _, stderr := execute(t, []string{"k8s", "render", p, "--shards", "2", "--image", "pdsoak:dev"})
	assert.Equal(t, ExitPass, code, stderr)
}
