package chaos

import (
	"context"
	"testing"
)

func TestGoRun(t *testing.T) {
	started := make(chan struct{})
	r := GoRun(context.Background(), func(ctx context.Context, s *LiveStats) {
		s.Sent.Add(3)
		s.Rejected.Add(1)
		close(started)
		<-ctx.Done()
		s.Cancelled.Add(2)
	})
	<-started
	if st := r.Stats(); st.Sent != 3 || st.Rejected != 1 {
		t.Fatalf("live stats = %+v", st)
	}
	r.Stop()
	r.Stop() // idempotent
	if st := r.Stats(); st.Cancelled != 2 {
		t.Fatalf("stats after Stop = %+v", st)
	}
}

func TestFuncRun(t *testing.T) {
	stopped := false
	r := FuncRun{StatsFunc: func() RunStats { return RunStats{Cancelled: 4} }, StopFunc: func() { stopped = true }}
	if r.Stats().Cancelled != 4 {
		t.Fatal("stats")
	}
	r.Stop()
	if !stopped {
		t.Fatal("stop")
	}
	var zero FuncRun
	zero.Stop()
	if zero.Stats() != (RunStats{}) {
		t.Fatal("zero FuncRun")
	}
}
