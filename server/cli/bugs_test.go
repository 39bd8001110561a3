package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSGLangBugFlags: --sglang-bug is refused where it cannot apply, with the flag named.
func TestSGLangBugFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown bug", []string{"decode", "--semantics", "sglang", "--sglang-bug", "nope"}, `"nope" is unknown`},
		{"worker bug needs sglang", []string{"decode", "--sglang-bug", "decode-oom-requeue"}, "--sglang-bug needs --semantics sglang"},
		{"router bug on a worker", []string{"decode", "--semantics", "sglang", "--sglang-bug", "prefill-fail-no-decode-abort"}, "is a router bug"},
		{"router bug needs sglang", []string{"router", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2",
			"--sglang-bug", "prefill-fail-no-decode-abort"}, "--sglang-bug needs --semantics sglang"},
		{"worker bug on the router", []string{"router", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2",
			"--semantics", "sglang", "--sglang-bug", "abort-storm-orphans"}, "is a worker bug"},
		{"waiting timeout is sglang's", []string{"decode", "--disaggregation-waiting-timeout", "1"}, "applies to --semantics sglang only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tc.want)
			assertUserFacing(t, stderr)
		})
	}
}
