// Package traces reads public LLM serving traces and turns them into a replay schedule.
//
// Formats (detected from the first line, or named):
//   - mooncake: JSONL, one request a line: timestamp (ms from the trace's start),
//     input_length, output_length and hash_ids (one id per 512-token block; equal ids
//     are equal blocks), as kvcache-ai/Mooncake's FAST25-release/traces.
//   - azure: CSV with header TIMESTAMP,ContextTokens,GeneratedTokens (timestamps as
//     "2023-11-16 18:15:46.6805900"), as Azure/AzurePublicDataset's LLM inference traces.
//   - burstgpt: CSV with header Timestamp,Model,Request tokens,Response tokens,Total
//     tokens,Log Type (timestamp in seconds), as HPMLL/BurstGPT.
//
// Everything here is pure: Parse reads bytes, Window selects and rescales, Prompt
// synthesizes text so that equal hash ids give identical blocks (a prefix cache then sees
// the trace's own reuse), and Reuse measures that reuse the way a radix cache would.
//
//	tr, err := traces.Parse("conv.jsonl", data, "")      // detect the format
//	sched := tr.Window(traces.Window{Speedup: 2, Limit: 200})
//	for _, r := range sched { text := traces.Prompt(r, 64, seed) ... }
package traces
