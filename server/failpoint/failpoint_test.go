package failpoint

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() Option { return WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))) }

func evalN(t *testing.T, r *Registry, name string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		v, err := r.Eval(context.Background(), name)
		if err != nil {
			t.Fatalf("Eval %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

func TestEvalSequences(t *testing.T) {
	tests := []struct {
		name     string
		terms    string
		want     []string
		wantHits int64
	}{
		{"return every time", "return(x)", []string{"x", "x", "x"}, 3},
		{"count then nothing", "2*return(x)", []string{"x", "x", ""}, 2},
		{"off then return", "2*off->return(c)", []string{"", "", "c", "c"}, 2},
		{"count chain", "1*return(a)->1*return(b)->return(c)", []string{"a", "b", "c", "c"}, 4},
		{"zero count skipped", "0*return(a)->return(b)", []string{"b"}, 1},
		{"off forever", "off", []string{"", ""}, 0},
		{"bare return", "return", []string{""}, 1},
		{"print", "print(hello)", []string{""}, 1},
		{"100 percent", "100%return(y)", []string{"y", "y"}, 2},
		{"0 percent", "0%return(y)", []string{"", ""}, 0},
		{"short sleep", "sleep(1)", []string{"", ""}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry(quiet())
			require.NoError(t, r.Enable("a/b", tc.terms))
			got := evalN(t, r, "a/b", len(tc.want))
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("evals = %q, want %q", got, tc.want)
				}
			}
			s, ok := r.Get("a/b")
			if !ok || s.Hits != tc.wantHits || s.Evals != int64(len(tc.want)) || r.Hits("a/b") != tc.wantHits {
				t.Errorf("status = %+v, want hits %d evals %d", s, tc.wantHits, len(tc.want))
			}
		})
	}
}

func TestEvalDisabledAndUnknown(t *testing.T) {
	r := NewRegistry(quiet())
	if v, err := r.Eval(context.Background(), "nope"); v != "" || err != nil {
		t.Fatalf("Eval of nothing = %q, %v", v, err)
	}
	require.NoError(t, r.Enable("x", "return(1)"))
	if v, _ := r.Eval(context.Background(), "other"); v != "" {
		t.Fatalf("other failpoint fired: %q", v)
	}
	if v, _ := r.Eval(context.Background(), "x"); v != "1" {
		t.Fatalf("enabled failpoint = %q", v)
	}
	require.NoError(t, r.Disable("x"))
	if v, _ := r.Eval(context.Background(), "x"); v != "" {
		t.Fatalf("disabled failpoint fired: %q", v)
	}
	if err := r.Disable("x"); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("second Disable = %v, want ErrNotEnabled", err)
	}
	if err := r.Disable("never"); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("Disable unknown = %v, want ErrNotEnabled", err)
	}
	s, ok := r.Get("x")
	if !ok || s.Enabled || s.Hits != 1 {
		t.Fatalf("status after disable = %+v (hits must survive Disable)", s)
	}
	if r.active.Load() != 0 {
		t.Fatalf("active = %d after disabling everything", r.active.Load())
	}
}

func TestEnableErrors(t *testing.T) {
	r := NewRegistry(quiet())
	for _, name := range []string{"", "a b", "x?y", string(make([]byte, MaxNameLen+1))} {
		if err := r.Enable(name, "off"); !errors.Is(err, ErrBadName) {
			t.Errorf("Enable(%q) = %v, want ErrBadName", name, err)
		}
	}
	if err := r.Enable("ok", "bogus"); !errors.Is(err, ErrParse) {
		t.Errorf("Enable bad terms = %v, want ErrParse", err)
	}
	if len(r.List()) != 0 {
		t.Errorf("failed Enable left entries: %+v", r.List())
	}
}

func TestPercentagesSeeded(t *testing.T) {
	run := func(seed uint64) (int, []string) {
		r := NewRegistry(WithSeed(seed), quiet())
		require.NoError(t, r.Enable("p", "30%return(y)"))
		got := evalN(t, r, "p", 2000)
		n := 0
		for _, v := range got {
			if v == "y" {
				n++
			}
		}
		return n, got
	}
	n1, seq1 := run(7)
	n2, seq2 := run(7)
	if n1 != n2 {
		t.Fatalf("same seed, different counts: %d vs %d", n1, n2)
	}
	for i := range seq1 {
		if seq1[i] != seq2[i] {
			t.Fatalf("same seed, sequences differ at %d", i)
		}
	}
	// 30% of 2000 = 600, sd ≈ 20.5; a ±5 sd band never fails for a fixed seed.
	if n1 < 500 || n1 > 700 {
		t.Fatalf("30%% of 2000 fired %d times", n1)
	}
}

func TestEnableSpec(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.EnableSpec("engine/step=1*return(a); kvtransfer/send-frame=return(corrupt);"))
	if v, _ := r.Eval(context.Background(), EngineStep); v != "a" {
		t.Errorf("engine/step = %q", v)
	}
	if v, _ := r.Eval(context.Background(), KVTransferSendFrame); v != "corrupt" {
		t.Errorf("send-frame = %q", v)
	}
	if err := r.EnableSpec("novalue"); err == nil {
		t.Error("EnableSpec without '=' succeeded")
	}
}

// waitFor polls cond (bounded generously for a loaded machine); it is a synchronisation
// helper, not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, time.Millisecond, "waiting for %s", what)
}

func TestPauseReleasedByDisable(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.Enable(EngineStep, "pause"))
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.Eval(context.Background(), EngineStep)
			if err == nil && v != "" {
				err = errors.New("pause returned a value: " + v)
			}
			errs <- err
		}()
	}
	waitFor(t, "4 paused goroutines", func() bool { s, _ := r.Get(EngineStep); return s.Paused == n })
	select {
	case err := <-errs:
		t.Fatalf("a paused Eval returned before Disable: %v", err)
	default:
	}
	require.NoError(t, r.Disable(EngineStep))
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if s, _ := r.Get(EngineStep); s.Paused != 0 || s.Hits != n {
		t.Errorf("status after release = %+v", s)
	}
}

func TestPauseReleasedByChange(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.Enable("x", "pause"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Eval(context.Background(), "x")
	}()
	waitFor(t, "paused", func() bool { s, _ := r.Get("x"); return s.Paused == 1 })
	require.NoError(t, r.Enable("x", "off"))
	<-done
}

func TestPauseAndSleepHonourContext(t *testing.T) {
	for _, terms := range []string{"pause", "sleep(1h)"} {
		t.Run(terms, func(t *testing.T) {
			r := NewRegistry(quiet())
			require.NoError(t, r.Enable("x", terms))
			ctx, cancel := context.WithCancel(context.Background())
			res := make(chan error, 1)
			go func() {
				_, err := r.Eval(ctx, "x")
				res <- err
			}()
			waitFor(t, "held", func() bool { s, _ := r.Get("x"); return s.Paused+s.Sleeping == 1 })
			cancel()
			if err := <-res; !errors.Is(err, context.Canceled) {
				t.Fatalf("Eval after cancel = %v, want context.Canceled", err)
			}
		})
	}
}

func TestSleepReleasedByDisable(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.Enable("x", "sleep(1h)"))
	res := make(chan error, 1)
	go func() {
		_, err := r.Eval(context.Background(), "x")
		res <- err
	}()
	waitFor(t, "sleeping", func() bool { s, _ := r.Get("x"); return s.Sleeping == 1 })
	require.NoError(t, r.Disable("x"))
	require.NoError(t, <-res)
}

func TestPanic(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.Enable("x", "1*panic(boom)"))
	func() {
		defer func() {
			if p := recover(); p != "failpoint panic: x: boom" {
				t.Errorf("recovered %v", p)
			}
		}()
		_, _ = r.Eval(context.Background(), "x")
		t.Error("Eval did not panic")
	}()
	if v, err := r.Eval(context.Background(), "x"); v != "" || err != nil {
		t.Errorf("after the count: %q %v", v, err)
	}
}

func TestConcurrentCounts(t *testing.T) {
	r := NewRegistry(quiet())
	require.NoError(t, r.Enable("x", "100*return(y)"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if v, _ := r.Eval(context.Background(), "x"); v == "y" {
					mu.Lock()
					fired++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if fired != 100 || r.Hits("x") != 100 {
		t.Fatalf("fired %d, hits %d, want 100", fired, r.Hits("x"))
	}
}

func TestDefaultRegistry(t *testing.T) {
	t.Cleanup(Default.DisableAll)
	require.NoError(t, Enable("pkg/x", "return(z)"))
	if v, _ := Eval(context.Background(), "pkg/x"); v != "z" || Hits("pkg/x") != 1 {
		t.Fatalf("Eval = %q hits %d", v, Hits("pkg/x"))
	}
	if s, ok := Get("pkg/x"); !ok || !s.Enabled {
		t.Fatalf("Get = %+v", s)
	}
	if len(List()) == 0 {
		t.Fatal("List empty")
	}
	require.NoError(t, Disable("pkg/x"))
}

func BenchmarkEvalNothingEnabled(b *testing.B) {
	r := NewRegistry(quiet())
	ctx := context.Background()
	for b.Loop() {
		_, _ = r.Eval(ctx, EngineStep)
	}
}

func BenchmarkEvalOtherEnabled(b *testing.B) {
	r := NewRegistry(quiet())
	_ = r.Enable("other", "return(x)")
	ctx := context.Background()
	for b.Loop() {
		_, _ = r.Eval(ctx, EngineStep)
	}
}
