// Package kernels is the compute of the reference server: one Backend interface and
// three implementations (tinyref, a real tiny Llama-style transformer; simtime, a
// calibrated timing model; paced, tinyref compute held to simtime's step time), the
// paged KVStore they read and write, the byte-level tokenizer, and the matmul.
//
// A driver owns a backend and calls it once per scheduler step:
//
//	out := make([]int, len(batch))
//	err := b.Forward(batch, out) // writes K/V into b.KV(), samples next tokens
//	wait(b.StepTime(prefillTokens, decodeTokens))
package kernels
