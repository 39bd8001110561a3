package workload

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSeqIDIsSprintf(t *testing.T) {
	for _, name := range []string{"", "ol", "burst-1", "é<&>"} {
		for _, seq := range []uint64{0, 1, 42, 99999, 999999, 1000000, 123456789, math.MaxUint64} {
			assert.Equal(t, fmt.Sprintf("%s-%06d", name, seq), seqID(name, seq))
		}
	}
}
