package workload

import "strconv"

// seqID is fmt.Sprintf("%s-%06d", name, seq), a one-shot request's id, in one
// allocation: it is built for every request of an open loop or burst.
func seqID(name string, seq uint64) string {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], seq, 10)
	b := make([]byte, 0, len(name)+1+max(len(d), 6))
	b = append(b, name...)
	b = append(b, '-')
	for i := len(d); i < 6; i++ {
		b = append(b, '0')
	}
	return string(append(b, d...))
}
