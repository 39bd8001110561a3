package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClosest(t *testing.T) {
	faults := []string{"decode_crash", "network_latency", "network_partition", "prefill_crash", "process_kill"}
	tests := []struct {
		name       string
		word       string
		candidates []string
		want       string
	}{
		{"one letter missing", "decode_crsh", faults, "decode_crash"},
		{"case is ignored", "Decode_Crash", faults, "decode_crash"},
		{"transposition", "netwrok_latency", faults, "network_latency"},
		{"short word, one edit", "tft", []string{"ttft", "itl", "e2e"}, "ttft"},
		{"short word, too far", "xy", []string{"ttft", "itl", "e2e"}, ""},
		{"long name, several edits", "deadline_exceed", []string{"deadline_exceeded", "ok"}, "deadline_exceeded"},
		{"nothing close", "banana", faults, ""},
		{"empty word", "", faults, ""},
		{"no candidates", "decode_crash", nil, ""},
		{"tie goes to the first", "ab", []string{"aa", "bb"}, "aa"},
		{"too long to compare", string(make([]byte, 100)), faults, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Closest(tt.word, tt.candidates))
		})
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"p99", "p90", 1},
		{string(make([]byte, 65)), "a", -1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Distance(tt.a, tt.b), "%q %q", tt.a, tt.b)
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("decode_crsh", "decode_crash")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, word, cand string) {
		got := Closest(word, []string{cand})
		if got != "" && got != cand {
			t.Fatalf("Closest returned %q, not a candidate", got)
		}
		if d := Distance(word, cand); d >= 0 && d != Distance(cand, word) {
			t.Fatalf("distance is not symmetric: %q %q", word, cand)
		}
	})
}
