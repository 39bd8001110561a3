package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"pdsoak/metricnames"
)

// burstFault starts a load burst through the Env and proves it by the burst's statistics
// and, where the target is a process, by its queue and KV gauges.
type burstFault struct {
	*base
	burst Burst
	// gauges are metric names whose value above a threshold proves the fault; usage is
	// the threshold for the KV pool's usage, a fraction (usageGauges; 0: not checked).
	gauges []string
	usage  float64
	// waitIsEnough accepts a request of the burst seen waiting behind another as proof
	// (queue saturation: RunStats.QueuedBehind).
	waitIsEnough bool

	run Run
	// before holds, per member, the value at Apply of each gauge in changedOnly.
	before map[string]map[string]float64
}

// changedOnly are gauges that prove a fault only where their value changed since
// Apply: SGLang's sglang:num_retracted_reqs counts retractions of the last stats
// interval and a drained server keeps re-publishing it, so a retraction an hour ago
// still reads above zero.
var changedOnly = map[string]bool{metricnames.Retracted: true}

// usageGauges are the KV pool's usage as a fraction of 1 under SGLang's name and
// vLLM's (vllm:kv_cache_usage_perc, "1 means 100 percent usage"; gpu_cache_usage_perc
// before it).
var usageGauges = []string{metricnames.TokenUsage, metricnames.VLLMKVCacheUsage, metricnames.VLLMGPUCacheUsage}

func (f *burstFault) Apply(ctx context.Context, env Env) error {
	members, err := f.members(env)
	if err != nil {
		return err
	}
	f.before = map[string]map[string]float64{}
	if slices.ContainsFunc(f.gauges, func(g string) bool { return changedOnly[g] }) {
		for _, m := range members {
			if samples, err := env.Scrape(ctx, m); err == nil {
				f.before[m] = samples
			}
		}
	}
	r, err := env.Load(context.WithoutCancel(ctx), f.spec.Target, f.burst)
	if err != nil {
		return f.wrap(err, "start burst")
	}
	f.run = r
	return nil
}

func (f *burstFault) Verify(ctx context.Context, env Env) error {
	if f.run == nil {
		return f.errorf("burst not started")
	}
	st := f.run.Stats()
	if st.Rejected > 0 {
		f.evidence = fmt.Sprintf("burst %+v: %d of %d sent requests refused explicitly", f.burst, st.Rejected, st.Sent)
		return nil
	}
	var seen []string
	for _, m := range env.Members(f.spec.Target) {
		samples, err := env.Scrape(ctx, m)
		if err != nil {
			continue // a workload target or no metrics: other evidence must do
		}
		for _, g := range usageGauges {
			if u := samples[g]; f.usage > 0 && u >= f.usage {
				seen = append(seen, fmt.Sprintf("%s %s=%.2f", m, g, u))
			}
		}
		for _, g := range f.gauges {
			was, had := f.before[m][g]
			if samples[g] > 0 && (!changedOnly[g] || !had || samples[g] != was) {
				seen = append(seen, fmt.Sprintf("%s %s=%g", m, g, samples[g]))
			}
		}
	}
	if len(seen) > 0 {
		sort.Strings(seen)
		f.evidence = fmt.Sprintf("burst %+v (sent %d): %s", f.burst, st.Sent, strings.Join(seen, ", "))
		return nil
	}
	// A stream of the burst served to its end while others sent with it still had no
	// first token: the server held them back. The burst must go out whole: under a
	// concurrency cap the client starts a request as another ends, and one started
	// late has had no time to get its first token. Requests merely in flight prove
	// nothing: any server has some in flight.
	if f.waitIsEnough && f.uncapped() && st.QueuedBehind > 0 {
		f.evidence = fmt.Sprintf("burst of %d sent at once: a stream was served to its end while %d others sent with it had no first token yet",
			st.Sent, st.QueuedBehind)
		return nil
	}
	why := "no gauge showed pressure"
	if f.waitIsEnough {
		why = "no gauge showed pressure, and no stream was served to its end while another sent with it waited for its first token" +
			" (a burst of non-streamed requests is proved only by refusals or a queue gauge of a target process)"
		if !f.uncapped() {
			why = "no gauge showed pressure (a burst capped by concurrency below its size is proved only by refusals or gauges)"
		}
	}
	return f.errorf("no evidence yet: burst sent %d/%d, done %d, rejected 0, %s", st.Sent, f.burst.Requests, st.Done, why)
}

// uncapped reports whether the whole burst goes out at once.
func (f *burstFault) uncapped() bool {
	return f.burst.Concurrency == 0 || f.burst.Concurrency >= f.burst.Requests
}

func (f *burstFault) Revert(context.Context, Env) error {
	if f.run != nil {
		f.run.Stop()
		f.run = nil
	}
	return nil
}

// disconnectFault makes the client cancel streams and proves it by the cancel count.
type disconnectFault struct {
	*base
	d   Disconnect
	run Run
}

func (f *disconnectFault) Apply(ctx context.Context, env Env) error {
	if _, err := f.members(env); err != nil {
		return err
	}
	r, err := env.Disconnect(context.WithoutCancel(ctx), f.spec.Target, f.d)
	if err != nil {
		return f.wrap(err, "start client disconnects")
	}
	f.run = r
	return nil
}

func (f *disconnectFault) Verify(context.Context, Env) error {
	if f.run == nil {
		return errors.New("chaos: disconnects not started")
	}
	st := f.run.Stats()
	if st.Cancelled == 0 {
		return f.errorf("no stream cancelled yet (%d eligible seen)", st.Sent)
	}
	f.evidence = fmt.Sprintf("%d streams cancelled after %d tokens", st.Cancelled, f.d.AfterTokens)
	return nil
}

func (f *disconnectFault) Revert(context.Context, Env) error {
	if f.run != nil {
		f.run.Stop()
		f.run = nil
	}
	return nil
}

var errNothingToCancel = errors.New("params.fraction: 0 with requests 0 cancels nothing")
