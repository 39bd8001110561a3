package workload

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"pdsoak/ledger"
	"pdsoak/scenarios"
)

// StopGrace is how long past its window an open-loop attack may still send hits the
// attacker fell behind on before it is stopped.
const StopGrace = time.Second

// OpenLoop sends requests at the times a pacer dictates, whatever happens to earlier
// requests, through a vegeta Attacker (one per window: Attackers are single-use).
type OpenLoop struct {
	Common
	Pacer vegeta.Pacer
}

// schedPacer replays a precomputed schedule: hit i is due at sched[i]; after the last
// hit it stops, so the number of requests depends only on the scenario and seed.
// Offsets count from the window's start; vegeta's elapsed counts from its own start,
// offset later.
type schedPacer struct {
	sched  []time.Duration
	offset time.Duration
	rate   func(time.Duration) float64
}

func (p schedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.sched)) {
		return 0, true
	}
	return max(p.sched[hits]-(elapsed+p.offset), 0), false
}

func (p schedPacer) Rate(elapsed time.Duration) float64 { return p.rate(elapsed + p.offset) }

// Run implements Workload.
func (o *OpenLoop) Run(ctx context.Context, start time.Time, s Sender) Stats {
	from, until := o.window(start)
	if !SleepCtx(ctx, time.Until(from)) {
		return Stats{}
	}
	sched := Schedule(o.Pacer, o.Spec.Duration.D(), o.Spec.Count)
	// A shard sends its part of the unsharded schedule, under the unsharded numbers.
	sched, seqs := o.Shard.pick(sched, o.Spec.Pacer != nil && o.Spec.Pacer.Type == scenarios.PacerPoisson, o.rng(shardKey(o.Spec.Name)))
	if len(sched) == 0 {
		return Stats{}
	}
	rt := &senderTransport{o: o, s: s, ctx: ctx, sched: sched, seqs: seqs}
	opts := []func(*vegeta.Attacker){
		// Client must be the first option touching the client: vegeta's Connections,
		// KeepAlive, HTTP2 and MaxConnections options type-assert *http.Transport and
		// panic on a custom RoundTripper, so none of them is used.
		vegeta.Client(&http.Client{Transport: rt}),
		vegeta.Workers(uint64(min(len(sched), 64))),
		vegeta.MaxBody(0),
	}
	if o.Spec.MaxInFlight > 0 {
		// A shard holds its share of the in-flight cap (rounded up).
		m := o.Spec.MaxInFlight
		if !o.Shard.whole() {
			m = (m + o.Shard.Count - 1) / o.Shard.Count
		}
		opts = append(opts, vegeta.MaxWorkers(uint64(m)))
	}
	atk := vegeta.NewAttacker(opts...)
	targeter := func(t *vegeta.Target) error {
		t.Method = http.MethodPost
		t.URL = "http://pdsoak.invalid/" + o.Spec.Name
		return nil
	}
	// The schedule counts from the window's start, whenever the attack gets going.
	rt.began = from
	offset := time.Since(from)
	results := atk.Attack(targeter, schedPacer{sched: sched, offset: offset, rate: o.Pacer.Rate}, 0, o.Spec.Name)
	stopTimer := time.AfterFunc(time.Until(until.Add(StopGrace)), func() { atk.Stop() })
	defer stopTimer.Stop()
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	n := 0
	for range results {
		n++
	}
	return Stats{Requests: int(rt.sent.Load())}
}

// senderTransport is the Attacker's RoundTripper: it turns hit number seq into the
// seeded request seq, runs it through the Sender (which observes headers, tokens and
// stalls) and hands vegeta a small synthetic response.
type senderTransport struct {
	o     *OpenLoop
	s     Sender
	ctx   context.Context
	began time.Time
	sched []time.Duration
	seqs  []uint64 // a shard's unsharded sequence numbers (nil: unsharded)
	sent  atomic.Int64
}

func (t *senderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	seq, err := strconv.ParseUint(req.Header.Get("X-Vegeta-Seq"), 10, 64)
	scheduled := time.Now()
	if err == nil && seq < uint64(len(t.sched)) {
		scheduled = t.began.Add(t.sched[seq])
	}
	t.sent.Add(1)
	id := seq
	if t.seqs != nil && seq < uint64(len(t.seqs)) {
		id = t.seqs[seq]
	}
	res := t.s.Send(t.ctx, t.o.single(id, scheduled))
	code := res.Status
	if res.Outcome != ledger.OutcomeOK && (code >= 200 && code < 300 || code == 0) {
		code = 599 // a failed request vegeta must not count as a success
	}
	return &http.Response{
		Status: strconv.Itoa(code), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(string(res.Outcome))),
		ContentLength: int64(len(res.Outcome)), Request: req,
	}, nil
}
