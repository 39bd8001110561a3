package gpu

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Open on this machine, whatever it has: a machine without a driver (or a build
// without cgo) is an informational state, never an error.
func TestOpenSystem(t *testing.T) {
	s, err := Open()
	if err != nil {
		t.Fatalf("Open: %v (status %q)", err, s.Status())
	}
	t.Logf("available=%v: %s", s.Available(), s.Status())
	gs, err := s.Sample()
	if err != nil {
		t.Logf("sample errors (not fatal): %v", err)
	}
	if s.Available() != (len(gs) > 0) {
		t.Errorf("available=%v but %d readings", s.Available(), len(gs))
	}
	for _, g := range gs {
		t.Logf("%+v", g)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if gs, err := s.Sample(); gs != nil || err != nil {
		t.Errorf("Sample after Close = %v, %v; want nil, nil", gs, err)
	}
}
