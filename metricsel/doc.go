// Package metricsel parses and evaluates the one Prometheus selector the harness lets a
// scenario write: a counter's name with optional equality label matchers,
//
//	sglang:num_requests_total
//	vllm:request_success_total{finished_reason="length"}
//
// and sums the matching series of a scrape. It is what target.pd_counters names (the
// counter that proves a prefill happened on a prefill process, for the pd_path
// assertion); scenarios validates with it and the harness scrapes with it.
//
//	sel, err := metricsel.Parse(`vllm:request_success_total{finished_reason="length"}`)
//	fams, err := metricsel.ParseText(body)       // one /metrics answer
//	v, found := sel.Sum(fams)
//
// Only "=" matchers: a prefill counter is one series family narrowed by exact labels;
// regular expressions and != would make a typo match nothing silently.
package metricsel
