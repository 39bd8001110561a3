package suggest

import "strings"

// maxLen bounds the names compared (the distance is quadratic; a longer name is no typo
// of a short identifier anyway).
const maxLen = 64

// Closest returns the candidate closest to word (case-insensitive Levenshtein distance),
// or "" when none is close enough to be a typo: at most 2 edits and at most half of
// word's letters, or — for long names — at most a quarter of the candidate's letters.
// Ties go to the earlier candidate, so a sorted list gives a stable answer.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", -1
	for _, c := range candidates {
		d := Distance(w, strings.ToLower(c))
		if d < 0 || (bestD >= 0 && d >= bestD) {
			continue
		}
		if (d <= 2 && d <= (len(w)+1)/2) || d <= len(c)/4 {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b in bytes, or -1 when either is
// longer than 64 bytes.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return -1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
