package kernels

import (
	"slices"
	"time"
)

// CalibrationPoint is one step time a profile was fitted to: a step with Prefill prompt
// tokens (one request, no cached prefix) and Decode running sequences.
type CalibrationPoint struct {
	Profile         string
	Prefill, Decode int
	Step            time.Duration
	// Derivation shows how Step was summed from the source figures (see calibrationPoints).
	Derivation string
}

// CalibrationPoints returns the data points the named profile was fitted to, in table
// order; nil for a profile not fitted to published measurements.
func CalibrationPoints(profile string) []CalibrationPoint {
	var out []CalibrationPoint
	for _, c := range calibrationPoints {
		if c.Profile == profile {
			out = append(out, c)
		}
	}
	return slices.Clip(out)
}

// calibrationPoints are step times derived from Vidur's profiled operator times (figures
// taken, no code). Every decoding sequence has 2048 tokens of context: StepTime has no
// context argument, so Beta2 carries the decode attention at that length. Sources:
//
//	Vidur: github.com/microsoft/vidur at 7d47513363ec447a741ac5e47241580b47724fbf
//	  data/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv   (TP 1 rows)
//	  data/profiling/compute/a100/meta-llama/Meta-Llama-3-70B/mlp.csv  (TP 4 rows)
//	  data/profiling/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv    (TP 4 rows)
//	  data/profiling/compute/{a100,h100}/meta-llama/Llama-2-7b-hf/mlp.csv (TP 1 rows)
//	  data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv (4 workers, 4 per node)
//	Attention: data/profiling/compute/a100/meta-llama/Meta-Llama-3-8B/attention.csv is in
//	  Vidur's tree at that commit (blob aa049dea) but too large for the snapshot we could
//	  read; its figures come from the same path in the copy at
//	  github.com/sw5sh/cs378-assignment3 at 7ac2fe9fb6cea9d4630659a10c5cccfc9fbdd776
//	  (FlashInfer, TP 1, block 16, max_model_len 16384). Rows used, medians in ms per layer:
//	  decode (kv_cache_size 2048, batch B) attn_decode + attn_kv_cache_save:
//	    B=1 0.025+0.002, 2 0.025+0.002, 4 0.038+0.003, 8 0.059+0.002, 16 0.111+0.003,
//	    24 0.131+0.003, 32 0.177+0.003, 64 0.339+0.003, 96 0.518+0.003;
//	  full prefill (kv_cache_size 0, chunk P) attn_prefill + attn_kv_cache_save:
//	    P=128 0.015+0.036, 192 0.018+0.055, 256 0.022+0.071, 480 0.048+0.141,
//	    512 0.048+0.152, 992 0.103+0.525, 1024 0.1105+0.528 (two rows averaged),
//	    2048 0.317+1.093, 3072 0.602+1.700.
//
// A step is summed as Vidur's model time is (first order, no CPU overhead, embedding or LM
// head, which Vidur's model time leaves out too), layers × per-layer time, where a layer is
//
//   - linear: the medians of input_layernorm, attn_pre_proj, attn_rope, attn_post_proj,
//     post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj and add at Prefill+Decode
//     tokens (duplicate rows averaged);
//   - attention: the prefill row at chunk Prefill plus the decode row at batch Decode;
//   - with 4-way tensor parallelism, two all-reduces of (Prefill+Decode)·8192·2 bytes, each
//     a least-squares line through all 994 rows of that GPU's all_reduce.csv (A100:
//     0.0544 ms + 0.135 µs/token, H100: 0.0279 ms + 0.070 µs/token; single rows are noisy),
//     plus Vidur's default NCCL launch overhead of 0.02 ms.
//
// What Vidur did not measure for a profile is transferred, first order:
//
//   - llama3-8b-h100: Vidur has no Llama-3-8B H100 profile. Linear: the A100 figure times
//     the H100/A100 ratio of Llama-2-7B's linear sum at the same token count (both
//     measured, "×r" in the derivation). Attention: the A100 figures divided by 1.64 (mean
//     A100/H100 ratio of Llama-2-7B's linear sums at 1–64 tokens, memory-bound) for decode
//     and KV save, by 3.18 (at 1024–4096 tokens, compute-bound) for prefill attention.
//   - llama3-70b-*: no 70B attention rows. Per GPU at TP 4 a 70B layer has 2 KV heads and
//     16 query heads (Llama-3-8B at TP 1: 8 and 32), so decode at batch B reads the KV bytes
//     of the 8B decode row at batch B/4, prefill attention is halved and prefill KV save
//     quartered. llama3-70b-h100x4 takes its linear figures from Llama-2-70B on H100 (same
//     layer shapes: 8192 hidden, 28672 MLP, 64 query and 8 KV heads; on A100 the two models'
//     linear sums agree within 2.5%) and divides attention as for llama3-8b-h100.
//
// Mixed points use totals of 256, 512 and 1024 tokens: Vidur's H100 Llama-2-70B rows show a
// kernel-choice cliff at 544 tokens (64% over 512) that no first-order model follows.
var calibrationPoints = []CalibrationPoint{
	{"llama3-70b-a100x4", 0, 1, 38969 * time.Microsecond, "80 × (linear 0.311 + attention [decode@batch 1 0.025 + KV save 0.002] + all-reduce 2×(0.0546+0.02)) ms"},
	{"llama3-70b-a100x4", 0, 8, 40000 * time.Microsecond, "80 × (linear 0.322 + attention [decode@batch 2 0.025 + KV save 0.002] + all-reduce 2×(0.0555+0.02)) ms"},
	{"llama3-70b-a100x4", 0, 16, 41692 * time.Microsecond, "80 × (linear 0.327 + attention [decode@batch 4 0.038 + KV save 0.003] + all-reduce 2×(0.0566+0.02)) ms"},
	{"llama3-70b-a100x4", 0, 32, 43717 * time.Microsecond, "80 × (linear 0.328 + attention [decode@batch 8 0.059 + KV save 0.002] + all-reduce 2×(0.0587+0.02)) ms"},
	{"llama3-70b-a100x4", 0, 64, 49286 * time.Microsecond, "80 × (linear 0.336 + attention [decode@batch 16 0.111 + KV save 0.003] + all-reduce 2×(0.0630+0.02)) ms"},
	{"llama3-70b-a100x4", 0, 96, 56535 * time.Microsecond, "80 × (linear 0.398 + attention [decode@batch 24 0.131 + KV save 0.003] + all-reduce 2×(0.0673+0.02)) ms"},
	{"llama3-70b-a100x4", 128, 0, 49504 * time.Microsecond, "80 × (linear 0.419 + attention [prefill 0.015/2 + KV save 0.036/4] + all-reduce 2×(0.0717+0.02)) ms"},
	{"llama3-70b-a100x4", 256, 0, 70681 * time.Microsecond, "80 × (linear 0.637 + attention [prefill 0.022/2 + KV save 0.071/4] + all-reduce 2×(0.0889+0.02)) ms"},
	{"llama3-70b-a100x4", 512, 0, 117814 * time.Microsecond, "80 × (linear 1.124 + attention [prefill 0.048/2 + KV save 0.152/4] + all-reduce 2×(0.1233+0.02)) ms"},
	{"llama3-70b-a100x4", 1024, 0, 235660 * time.Microsecond, "80 × (linear 2.334 + attention [prefill 0.1105/2 + KV save 0.528/4] + all-reduce 2×(0.1923+0.02)) ms"},
	{"llama3-70b-a100x4", 2048, 0, 428933 * time.Microsecond, "80 × (linear 4.2298 + attention [prefill 0.317/2 + KV save 1.093/4] + all-reduce 2×(0.3301+0.02)) ms"},
	{"llama3-70b-a100x4", 3072, 0, 648345 * time.Microsecond, "80 × (linear 6.4025 + attention [prefill 0.602/2 + KV save 1.7/4] + all-reduce 2×(0.4679+0.02)) ms"},
	{"llama3-70b-a100x4", 192, 64, 79321 * time.Microsecond, "80 × (linear 0.637 + attention [prefill 0.018/2 + KV save 0.055/4; decode@batch 16 0.111 + KV save 0.003] + all-reduce 2×(0.0889+0.02)) ms"},
	{"llama3-70b-a100x4", 480, 32, 122474 * time.Microsecond, "80 × (linear 1.124 + attention [prefill 0.048/2 + KV save 0.141/4; decode@batch 8 0.059 + KV save 0.002] + all-reduce 2×(0.1233+0.02)) ms"},
	{"llama3-70b-a100x4", 992, 32, 240180 * time.Microsecond, "80 × (linear 2.334 + attention [prefill 0.103/2 + KV save 0.525/4; decode@batch 8 0.059 + KV save 0.002] + all-reduce 2×(0.1923+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 1, 23314 * time.Microsecond, "80 × (linear 0.179 + attention [(decode@batch 1 0.025 + KV save 0.002)/1.64] + all-reduce 2×(0.0280+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 8, 24032 * time.Microsecond, "80 × (linear 0.187 + attention [(decode@batch 2 0.025 + KV save 0.002)/1.64] + all-reduce 2×(0.0285+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 16, 24364 * time.Microsecond, "80 × (linear 0.1815 + attention [(decode@batch 4 0.038 + KV save 0.003)/1.64] + all-reduce 2×(0.0290+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 32, 26319 * time.Microsecond, "80 × (linear 0.1915 + attention [(decode@batch 8 0.059 + KV save 0.002)/1.64] + all-reduce 2×(0.0301+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 64, 29224 * time.Microsecond, "80 × (linear 0.191 + attention [(decode@batch 16 0.111 + KV save 0.003)/1.64] + all-reduce 2×(0.0324+0.02)) ms"},
	{"llama3-70b-h100x4", 0, 96, 31356 * time.Microsecond, "80 × (linear 0.201 + attention [(decode@batch 24 0.131 + KV save 0.003)/1.64] + all-reduce 2×(0.0346+0.02)) ms"},
	{"llama3-70b-h100x4", 128, 0, 25636 * time.Microsecond, "80 × (linear 0.199 + attention [prefill 0.015/2/3.18 + KV save 0.036/4/1.64] + all-reduce 2×(0.0368+0.02)) ms"},
	{"llama3-70b-h100x4", 256, 0, 30855 * time.Microsecond, "80 × (linear 0.24 + attention [prefill 0.022/2/3.18 + KV save 0.071/4/1.64] + all-reduce 2×(0.0457+0.02)) ms"},
	{"llama3-70b-h100x4", 512, 0, 45819 * time.Microsecond, "80 × (linear 0.375 + attention [prefill 0.048/2/3.18 + KV save 0.152/4/1.64] + all-reduce 2×(0.0635+0.02)) ms"},
	{"llama3-70b-h100x4", 1024, 0, 88972 * time.Microsecond, "80 × (linear 0.776 + attention [prefill 0.1105/2/3.18 + KV save 0.528/4/1.64] + all-reduce 2×(0.0991+0.02)) ms"},
	{"llama3-70b-h100x4", 2048, 0, 159838 * time.Microsecond, "80 × (linear 1.4007 + attention [prefill 0.317/2/3.18 + KV save 1.093/4/1.64] + all-reduce 2×(0.1703+0.02)) ms"},
	{"llama3-70b-h100x4", 3072, 0, 248563 * time.Microsecond, "80 × (linear 2.23 + attention [prefill 0.602/2/3.18 + KV save 1.7/4/1.64] + all-reduce 2×(0.2415+0.02)) ms"},
	{"llama3-70b-h100x4", 192, 64, 36177 * time.Microsecond, "80 × (linear 0.24 + attention [prefill 0.018/2/3.18 + KV save 0.055/4/1.64; (decode@batch 16 0.111 + KV save 0.003)/1.64] + all-reduce 2×(0.0457+0.02)) ms"},
	{"llama3-70b-h100x4", 480, 32, 48664 * time.Microsecond, "80 × (linear 0.375 + attention [prefill 0.048/2/3.18 + KV save 0.141/4/1.64; (decode@batch 8 0.059 + KV save 0.002)/1.64] + all-reduce 2×(0.0635+0.02)) ms"},
	{"llama3-70b-h100x4", 992, 32, 91820 * time.Microsecond, "80 × (linear 0.776 + attention [prefill 0.103/2/3.18 + KV save 0.525/4/1.64; (decode@batch 8 0.059 + KV save 0.002)/1.64] + all-reduce 2×(0.0991+0.02)) ms"},
	{"llama3-8b-a100", 0, 1, 10560 * time.Microsecond, "32 × (linear 0.303 + attention [decode 0.025 + KV save 0.002]) ms"},
	{"llama3-8b-a100", 0, 8, 11936 * time.Microsecond, "32 × (linear 0.312 + attention [decode 0.059 + KV save 0.002]) ms"},
	{"llama3-8b-a100", 0, 16, 13776 * time.Microsecond, "32 × (linear 0.3165 + attention [decode 0.111 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 0, 32, 16672 * time.Microsecond, "32 × (linear 0.341 + attention [decode 0.177 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 0, 64, 22176 * time.Microsecond, "32 × (linear 0.351 + attention [decode 0.339 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 0, 96, 29280 * time.Microsecond, "32 × (linear 0.394 + attention [decode 0.518 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 128, 0, 14816 * time.Microsecond, "32 × (linear 0.412 + attention [prefill 0.015 + KV save 0.036]) ms"},
	{"llama3-8b-a100", 256, 0, 22464 * time.Microsecond, "32 × (linear 0.609 + attention [prefill 0.022 + KV save 0.071]) ms"},
	{"llama3-8b-a100", 512, 0, 41040 * time.Microsecond, "32 × (linear 1.0825 + attention [prefill 0.048 + KV save 0.152]) ms"},
	{"llama3-8b-a100", 1024, 0, 95568 * time.Microsecond, "32 × (linear 2.348 + attention [prefill 0.1105 + KV save 0.528]) ms"},
	{"llama3-8b-a100", 2048, 0, 188800 * time.Microsecond, "32 × (linear 4.49 + attention [prefill 0.317 + KV save 1.093]) ms"},
	{"llama3-8b-a100", 3072, 0, 278832 * time.Microsecond, "32 × (linear 6.4115 + attention [prefill 0.602 + KV save 1.7]) ms"},
	{"llama3-8b-a100", 192, 64, 32768 * time.Microsecond, "32 × (linear 0.609 + attention [prefill 0.018 + KV save 0.055; decode 0.339 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 480, 32, 46448 * time.Microsecond, "32 × (linear 1.0825 + attention [prefill 0.048 + KV save 0.141; decode 0.177 + KV save 0.003]) ms"},
	{"llama3-8b-a100", 992, 32, 100992 * time.Microsecond, "32 × (linear 2.348 + attention [prefill 0.103 + KV save 0.525; decode 0.177 + KV save 0.003]) ms"},
	{"llama3-8b-h100", 0, 1, 6378 * time.Microsecond, "32 × (linear 0.303×0.603 + attention [(decode 0.025 + KV save 0.002)/1.64]) ms"},
	{"llama3-8b-h100", 0, 8, 7260 * time.Microsecond, "32 × (linear 0.312×0.608 + attention [(decode 0.059 + KV save 0.002)/1.64]) ms"},
	{"llama3-8b-h100", 0, 16, 8614 * time.Microsecond, "32 × (linear 0.3165×0.631 + attention [(decode 0.111 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 0, 32, 10144 * time.Microsecond, "32 × (linear 0.341×0.607 + attention [(decode 0.177 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 0, 64, 13465 * time.Microsecond, "32 × (linear 0.351×0.604 + attention [(decode 0.339 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 0, 96, 17989 * time.Microsecond, "32 × (linear 0.394×0.620 + attention [(decode 0.518 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 128, 0, 7713 * time.Microsecond, "32 × (linear 0.412×0.520 + attention [prefill 0.015/3.18 + KV save 0.036/1.64]) ms"},
	{"llama3-8b-h100", 256, 0, 11624 * time.Microsecond, "32 × (linear 0.609×0.514 + attention [prefill 0.022/3.18 + KV save 0.071/1.64]) ms"},
	{"llama3-8b-h100", 512, 0, 15896 * time.Microsecond, "32 × (linear 1.0825×0.359 + attention [prefill 0.048/3.18 + KV save 0.152/1.64]) ms"},
	{"llama3-8b-h100", 1024, 0, 34677 * time.Microsecond, "32 × (linear 2.348×0.309 + attention [prefill 0.1105/3.18 + KV save 0.528/1.64]) ms"},
	{"llama3-8b-h100", 2048, 0, 68057 * time.Microsecond, "32 × (linear 4.49×0.303 + attention [prefill 0.317/3.18 + KV save 1.093/1.64]) ms"},
	{"llama3-8b-h100", 3072, 0, 105911 * time.Microsecond, "32 × (linear 6.4115×0.325 + attention [prefill 0.602/3.18 + KV save 1.7/1.64]) ms"},
	{"llama3-8b-h100", 192, 64, 17952 * time.Microsecond, "32 × (linear 0.609×0.514 + attention [prefill 0.018/3.18 + KV save 0.055/1.64; (decode 0.339 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 480, 32, 19197 * time.Microsecond, "32 × (linear 1.0825×0.359 + attention [prefill 0.048/3.18 + KV save 0.141/1.64; (decode 0.177 + KV save 0.003)/1.64]) ms"},
	{"llama3-8b-h100", 992, 32, 38060 * time.Microsecond, "32 × (linear 2.348×0.309 + attention [prefill 0.103/3.18 + KV save 0.525/1.64; (decode 0.177 + KV save 0.003)/1.64]) ms"},
}
