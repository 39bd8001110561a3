package gpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Open on this machine, whatever it has: a machine without a driver (or a build
// without cgo) is an informational state, never an error.
func TestOpenSystem(t *testing.T) {
	s, err := Open()
	require.NoError(t, err, "status %q", s.Status())
	t.Logf("available=%v: %s", s.Available(), s.Status())
	gs, err := s.Sample()
	if err != nil {
		t.Logf("sample errors (not fatal): %v", err)
	}
	assert.Equal(t, s.Available(), len(gs) > 0, "available=%v but %d readings", s.Available(), len(gs))
	assert.Equal(t, s.Available(), len(s.Names()) > 0, "names %q", s.Names())
	for _, g := range gs {
		t.Logf("%+v", g)
	}
	assert.NoError(t, s.Close())
	gs, err = s.Sample()
	assert.Nil(t, gs, "Sample after Close")
	assert.NoError(t, err, "Sample after Close")
}
