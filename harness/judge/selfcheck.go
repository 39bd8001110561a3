package judge

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"pdsoak/internal/nearest"
)

// LagRecorder collects the harness's own scheduling lag: how late requests were sent
// relative to their schedule, and how late the self-check ticker woke. The runner
// records it; the simulator has no lag (virtual time) and builds its SelfCheck directly.
type LagRecorder struct {
	every time.Duration // the ticker's period (Options.SelfCheckTick)
	mu    sync.Mutex
	send  []time.Duration
	tick  []time.Duration
	stop  chan struct{}
	done  chan struct{}
	start sync.Once
}

// NewLagRecorder measures the ticker's lag every period (Start to run it).
func NewLagRecorder(every time.Duration) *LagRecorder {
	return &LagRecorder{every: every, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start runs the ticker until Stop.
func (l *LagRecorder) Start() {
	l.start.Do(func() {
		go func() {
			defer close(l.done)
			t := time.NewTicker(l.every)
			defer t.Stop()
			next := time.Now().Add(l.every)
			for {
				select {
				case <-l.stop:
					return
				case <-t.C:
					// The tick's own timestamp is when the timer fired; what matters is
					// when this goroutine got to run.
					now := time.Now()
					lag := max(now.Sub(next), 0)
					// A ticker drops ticks when the reader is late; realign to the grid.
					for !next.After(now) {
						next = next.Add(l.every)
					}
					l.mu.Lock()
					if len(l.tick) < 1_000_000 {
						l.tick = append(l.tick, lag)
					}
					l.mu.Unlock()
				}
			}
		}()
	})
}

// Stop ends the ticker (idempotent once started).
func (l *LagRecorder) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.start.Do(func() { close(l.done) })
	<-l.done
}

// Send records one request's send lag.
func (l *LagRecorder) Send(d time.Duration) {
	l.mu.Lock()
	if len(l.send) < 5_000_000 {
		l.send = append(l.send, max(d, 0))
	}
	l.mu.Unlock()
}

// SelfCheck is the verdict on the harness's own timing.
type SelfCheck struct {
	Passed                bool
	SendP99, SendMax      time.Duration
	TickP99, TickMax      time.Duration
	SendSamples, TickSamp int
	MaxLag                time.Duration
}

// Detail explains the verdict in one line.
func (s SelfCheck) Detail() string {
	verdict := "harness kept its schedule"
	if !s.Passed {
		verdict = "harness was the bottleneck: the run is invalid"
	}
	return fmt.Sprintf("%s: send lag p99 %v max %v (%d requests), ticker lag p99 %v max %v (%d ticks), bound %v",
		verdict, s.SendP99, s.SendMax, s.SendSamples, s.TickP99, s.TickMax, s.TickSamp, s.MaxLag)
}

// Result computes the verdict against maxLag (p99 of both series must stay within).
func (l *LagRecorder) Result(maxLag time.Duration) SelfCheck {
	l.mu.Lock()
	send := append([]time.Duration(nil), l.send...)
	tick := append([]time.Duration(nil), l.tick...)
	l.mu.Unlock()
	r := SelfCheck{MaxLag: maxLag, SendSamples: len(send), TickSamp: len(tick)}
	r.SendP99, r.SendMax = p99max(send)
	r.TickP99, r.TickMax = p99max(tick)
	r.Passed = maxLag <= 0 || (r.SendP99 <= maxLag && r.TickP99 <= maxLag)
	return r
}

func p99max(d []time.Duration) (time.Duration, time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return nearest.Rank(d, 0.99), d[len(d)-1]
}
