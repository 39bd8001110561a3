// Package kernels is the compute of the reference server: one Backend interface and
// three implementations, the paged KVStore they read and write, the byte-level
// tokenizer, and a batch-invariant matmul.
//
//   - tinyref: a real tiny Llama-style transformer (RMSNorm, RoPE, grouped-query attention
//     over the paged KV cache, SwiGLU, output head), weights generated from Config.Seed,
//     greedy or temperature + top-p sampling drawn from (Sampling.Seed, position).
//   - simtime: a timing model, step = max(β0, βc·tokens) + β1·prefill_tokens +
//     β2·decode_tokens with seeded jitter, from a named Profile (Profiles lists them; the
//     GPU ones are fitted to Vidur's profiled operator times, CalibrationPoints lists the
//     data). It writes small
//     deterministic KV bytes and picks tokens from a hash of everything it reads, so a
//     corrupted page shows up in the output.
//   - paced: tinyref compute with a simtime profile's step time.
//
// # Sizing before allocating
//
// A server asks for the model's footprint first, sizes the pool, then builds the backend:
//
//	cfg := kernels.DefaultConfig()       // tinyref, "ref", 128-dim, 2 layers
//	info, err := kernels.Describe(cfg)   // no allocation
//	cfg.NumPages = poolPages(info.ModelKVBytesPerToken)
//	b, err := kernels.New(cfg)           // validates every field, allocates the KVStore
//
// # Main loop
//
// A driver goroutine owns the backend and calls it once per scheduler step:
//
//	out := make([]int, len(batch))
//	err := b.Forward(batch, out) // writes K/V of every input token, samples next tokens
//	wait(b.StepTime(prefillTokens, decodeTokens))
//
// Each SeqInput carries the request's new tokens, the position of the first, its page
// table and its sampling parameters; out[i] is the sampled token or -1.
//
// # KV layout
//
// KVStore.LayerFloats(page, layer) is one contiguous frame of PageSize token slots.
// For tinyref and paced, slot t holds the token's K then its V, KVHeads×HeadDim floats
// each (RoPE already applied to K). simtime stores SimKVBytesPerTokenPerLayer bytes per
// slot. ModelInfo.ModelKVBytesPerToken is what pool sizing uses: tinyref's real bytes,
// or the profile's modelled model for simtime and paced.
//
// # Determinism and batch invariance
//
// Every dot product uses one summation order, the lane-8 order (see matmul.go), in the
// AVX2 assembly and in the portable Go code alike (build tag purego forces the latter);
// matmuls are split across goroutines only along output features; attention reduces each
// query over its own positions in order; sampling draws from (seed, position). So a
// request produces bit-identical K/V, logits and tokens alone or in a batch of any size,
// prefilled in one call or in chunks, on a prefill worker or a decode worker — which is
// what lets the PD server's greedy output equal the colocated server's byte for byte.
//
// # Text
//
// Tokenizer maps bytes to ids 0..255, with BOS (256) and EOS (257); ids from 258 up are
// padding. StreamDecoder emits only complete UTF-8, with U+FFFD for invalid bytes, so
// streamed text equals Decode of the same ids. An untrained model writes noise, so
// tinyref's head adds fixed unigram, bigram and context biases (textbias.go): output
// looks like English-ish words and ends with EOS after a period now and then.
package kernels
