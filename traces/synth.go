package traces

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
)

// SynthBurstGPT writes n requests in BurstGPT's CSV format (header and columns as
// HPMLL/BurstGPT's data/BurstGPT_*.csv, timestamps in whole seconds): bursty arrivals
// at a mean of rate per second (exponential gaps, one in eight a burst of near-zero
// gaps), log-normal request and response lengths, ChatGPT and GPT-4 rows, conversation
// and API logs. It is format-faithful synthetic data for when the real trace cannot be
// shipped: its numbers are not BurstGPT's.
func SynthBurstGPT(rng *rand.Rand, n int, rate float64) []byte {
	var b bytes.Buffer
	b.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	t := 0.0
	for i := 0; i < n; i++ {
		gap := rng.ExpFloat64() / rate
		if rng.IntN(8) == 0 {
			gap *= 0.05
		}
		t += gap
		model := "ChatGPT"
		if rng.IntN(5) == 0 {
			model = "GPT-4"
		}
		in := int(math.Min(math.Exp(5.5+1.0*rng.NormFloat64()), 8000)) + 1
		out := int(math.Min(math.Exp(5.0+0.9*rng.NormFloat64()), 2000))
		log := "Conversation log"
		if rng.IntN(3) == 0 {
			log = "API log"
		}
		fmt.Fprintf(&b, "%d,%s,%d,%d,%d,%s\n", int(t), model, in, out, in+out, log)
	}
	return b.Bytes()
}
