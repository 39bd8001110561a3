package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateAcceptsPacks runs `harness validate` on every launch pack in
// scenarios/targets with only its required variables set (every other variable the pack
// documents is set empty, so its default applies whatever this environment holds), and
// `harness plan` shows the expanded command lines. Without the required variables,
// validate exits 2 naming them.
func TestValidateAcceptsPacks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "targets", "*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 4)
	vars := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data := readFile(t, file)
			for _, m := range vars.FindAllStringSubmatch(data, -1) {
				t.Setenv(m[1], "")
			}
			// The required ones unset (t.Setenv restores them after the test).
			for _, k := range []string{"MODEL_PATH", "VLLM_PROXY"} {
				t.Setenv(k, "")
				require.NoError(t, os.Unsetenv(k))
			}
			code, _, stderr := execute(t, []string{"validate", file})
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, "environment variable MODEL_PATH is not set")

			t.Setenv("MODEL_PATH", "/models/m")
			t.Setenv("VLLM_PROXY", "/vllm/toy_proxy_server.py")
			code, stdout, stderr := execute(t, []string{"validate", file})
			require.Equal(t, 0, code, "%s%s", stdout, stderr)
			code, stdout, stderr = execute(t, []string{"plan", file})
			require.Equal(t, 0, code, "%s", stderr)
			assert.Contains(t, stdout, "env       MODEL_PATH=/models/m\n")
			assert.Regexp(t, `(?m)^launch    \S+ \(\w+\): .*/models/m`, stdout)
		})
	}
}
