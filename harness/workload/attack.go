package workload

import (
	"context"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// attack is vegeta's Attacker loop (v12.13 Attacker.Attack) without its HTTP hit: the
// pacer says when hit number n is due, idle workers take hits from an unbuffered channel,
// and when every worker is busy a new one starts, up to maxWorkers (0: unbounded); at
// the cap the loop waits for a worker, which is the in-flight bound. hit runs on a worker
// with the hit's number. It stops when the pacer stops or ctx ends (hits in flight run
// to their end, as after Attacker.Stop) and returns once every hit returned.
//
// Why not the Attacker itself: it can only hit through an http.Client, so every request
// paid for a throwaway http.Request (URL parse, header copies), a synthetic response,
// vegeta's Result and a channel hop to a results reader, all discarded (about 20
// allocations and a sixth of the harness's CPU per open-loop request, docs/BENCHMARKS.md).
// The pacers stay vegeta's.
func attack(ctx context.Context, p vegeta.Pacer, workers, maxWorkers uint64, hit func(seq uint64)) {
	if maxWorkers == 0 {
		maxWorkers = ^uint64(0)
	}
	workers = min(workers, maxWorkers)
	ticks := make(chan uint64)
	var wg sync.WaitGroup
	work := func() {
		defer wg.Done()
		for seq := range ticks {
			hit(seq)
		}
	}
	for range workers {
		wg.Add(1)
		go work()
	}
	defer wg.Wait()
	defer close(ticks)
	began := time.Now()
	sleep := time.NewTimer(time.Hour) // one timer for every wait, not one per hit
	defer sleep.Stop()
	for count := uint64(0); ; {
		wait, stop := p.Pace(time.Since(began), count)
		if stop || ctx.Err() != nil {
			return
		}
		if wait > 0 {
			sleep.Reset(wait)
			select {
			case <-sleep.C:
			case <-ctx.Done():
				return
			}
		}
		if workers < maxWorkers {
			select {
			case ticks <- count:
				count++
				continue
			case <-ctx.Done():
				return
			default: // every worker is busy: start one more
				workers++
				wg.Add(1)
				go work()
			}
		}
		select {
		case ticks <- count:
			count++
		case <-ctx.Done():
			return
		}
	}
}
