package kernels

import (
	"testing"

	"go.uber.org/goleak"
)

// MatMulT and attention start goroutines for large steps; none may outlive its call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
