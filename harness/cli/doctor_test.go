package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var packPort = regexp.MustCompile(`\$\{[A-Z_]*PORT:-([0-9]+)\}`)

// doctor's port check looks at the ports of the packs the night runs for --stack: every
// default port of the pack (a leftover server on one of them fails the night), not the
// SGLang pack's for a vLLM night.
func TestDoctorChecksThePortsOfItsStack(t *testing.T) {
	for _, tc := range []struct{ stack, pack string }{
		{"sglang", "sglang-pd.yaml"},
		{"vllm", "vllm-pd.yaml"},
		{"sglang,vllm", "vllm-pd.yaml"},
		{"sglang,vllm", "sglang-pd.yaml"},
	} {
		t.Run(tc.stack+" "+tc.pack, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "targets", tc.pack))
			require.NoError(t, err)
			ports := packPort.FindAllStringSubmatch(string(b), -1)
			require.NotEmpty(t, ports)
			dir := t.TempDir()
			_, out, errOut := execute(t, []string{"doctor", "--stack", tc.stack, "--gpus", "0", "--model", dir,
				"--archive", dir, "--min-free-gib", "0", "--python", filepath.Join(dir, "no-python")})
			for _, p := range ports {
				assert.Regexp(t, `(?m)^\S+\s+port `+p[1]+`: `, out, "stderr: %s", errOut)
			}
		})
	}
}
