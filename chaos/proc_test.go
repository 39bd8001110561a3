package chaos

import (
	"errors"
	"os"
	"testing"

	"pdsoak/scenarios"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want byte
		ok   bool
	}{
		{"plain", "123 (sleep) S 1 2 3", 'S', true},
		{"stopped", "123 (sleep) T 1 2 3", 'T', true},
		{"comm with spaces and parens", "77 (a) b (c)) Z 1", 'Z', true},
		{"no paren", "123 sleep S", 0, false},
		{"truncated", "123 (sleep)", 0, false},
		{"no space", "123 (sleep)S 1", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("parseStat(%q) = %c, %v", tc.in, got, err)
			}
		})
	}
}

func TestProcState(t *testing.T) {
	st, err := ProcState(os.Getpid())
	if err != nil || (st != 'R' && st != 'S') {
		t.Fatalf("own state = %c, %v", st, err)
	}
	if _, err := ProcState(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("missing pid: %v", err)
	}
	if _, err := ProcState(0); err == nil {
		t.Fatal("pid 0 accepted")
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"1 (x) S 0", "1 (x)) T", ")", "(", "1 () R", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStat([]byte(s))
		if err == nil && st == 0 && len(s) > 0 && s[len(s)-1] != 0 {
			// a zero state byte can only come from a NUL in the input
			t.Fatalf("parseStat(%q) returned state 0 without error", s)
		}
	})
}

// FuzzFaultParams feeds arbitrary param values to every fault type: constructors must
// return an error or a fault, never panic.
func FuzzFaultParams(f *testing.F) {
	f.Add("latency", "200ms", int64(5), 0.5, true)
	f.Add("mode", "pause", int64(-1), 101.0, false)
	f.Add("toxic", "slicer", int64(1<<40), -3.0, true)
	f.Fuzz(func(t *testing.T, key, sval string, ival int64, fval float64, bval bool) {
		for _, typ := range Types() {
			for _, v := range []any{sval, ival, fval, bval, nil} {
				_, _ = New(scenarios.Fault{Name: "f", Type: typ.Name, Target: "x", Params: map[string]any{key: v}})
			}
		}
	})
}
