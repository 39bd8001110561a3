package cli

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpForwardsSemanticsToRouter: `pdserver up --semantics sglang` gives the router the
// workers' semantics (a strict router in front of sglang workers would refuse router
// bugs and judge differently); worker-only flags stay with the workers.
func TestUpForwardsSemanticsToRouter(t *testing.T) {
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	fs.String("semantics", "strict", "")
	fs.Int("max-running-requests", 64, "")
	fs.Int("prefill", 1, "")
	require.NoError(t, fs.Parse([]string{"--semantics", "sglang", "--max-running-requests", "4", "--prefill", "2"}))
	workers, router := forwardedFlags(fs)
	assert.ElementsMatch(t, []string{"--semantics=sglang", "--max-running-requests=4"}, workers)
	assert.Equal(t, []string{"--semantics=sglang"}, router)
}
