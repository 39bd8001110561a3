package reports

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRootStage(t *testing.T) {
	h := func(p, s string) held { return held{process: p, stage: s} }
	for _, tc := range []struct {
		name    string
		in      []held
		root    held
		waiting []held
	}{
		{"decode prealloc holds prefill's bootstrap", []held{h("router", "decode_leg"), h("prefill-0", "bootstrap"), h("decode-0", "prealloc")},
			h("decode-0", "prealloc"), []held{h("router", "decode_leg"), h("prefill-0", "bootstrap")}},
		{"decode waits for KV prefill has not sent", []held{h("prefill-0", "forward"), h("decode-0", "transfer")},
			h("prefill-0", "forward"), []held{h("decode-0", "transfer")}},
		{"decode waits for KV prefill no longer holds", []held{h("decode-1", "transfer")}, h("decode-1", "transfer"), nil},
		{"prefill alone", []held{h("router", "leg"), h("prefill-0", "waiting")}, h("prefill-0", "waiting"), []held{h("router", "leg")}},
		{"a launched process", []held{h("server", "running")}, h("server", "running"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, waiting := rootStage(tc.in)
			assert.Equal(t, tc.root, root)
			assert.Equal(t, tc.waiting, waiting)
		})
	}
}
