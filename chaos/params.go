package chaos

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// params reads a spec's params strictly: every key must be read by the constructor, and
// values must have the right type. Errors accumulate; done reports them all at once.
type params struct {
	m    map[string]any
	used map[string]bool
	errs []error
}

func newParams(m map[string]any) *params { return &params{m: m, used: map[string]bool{}} }

func (p *params) get(key string) (any, bool) {
	p.used[key] = true
	v, ok := p.m[key]
	return v, ok && v != nil
}

func (p *params) fail(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("params.%s: %s", key, fmt.Sprintf(format, args...)))
}

// Duration reads a duration: a Go duration string ("250ms", "5s") or a number of
// milliseconds.
func (p *params) Duration(key string, def time.Duration) time.Duration {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	var d time.Duration
	switch x := v.(type) {
	case string:
		pd, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			p.fail(key, "invalid duration %q (want e.g. 250ms, 5s)", x)
			return def
		}
		d = pd
	default:
		f, ok := number(v)
		if !ok {
			p.fail(key, "must be a duration such as 250ms, got %v", v)
			return def
		}
		d = time.Duration(f * float64(time.Millisecond))
	}
	if d < 0 {
		p.fail(key, "must be ≥ 0")
		return def
	}
	return d
}

// Int reads an integer in [lo, hi].
func (p *params) Int(key string, def, lo, hi int) int {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	f, ok := number(v)
	if !ok || f != math.Trunc(f) {
		p.fail(key, "must be an integer, got %v", v)
		return def
	}
	if f < float64(lo) || f > float64(hi) {
		p.fail(key, "must be in [%d, %d], got %v", lo, hi, v)
		return def
	}
	return int(f)
}

// Float reads a number in [lo, hi].
func (p *params) Float(key string, def, lo, hi float64) float64 {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	f, ok := number(v)
	if !ok {
		p.fail(key, "must be a number, got %v", v)
		return def
	}
	if f < lo || f > hi {
		p.fail(key, "must be in [%g, %g], got %v", lo, hi, v)
		return def
	}
	return f
}

// String reads a string; when choices are given it must be one of them.
func (p *params) String(key, def string, choices ...string) string {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		p.fail(key, "must be a string, got %v", v)
		return def
	}
	if len(choices) > 0 {
		for _, c := range choices {
			if s == c {
				return s
			}
		}
		p.fail(key, "must be one of %s, got %q", strings.Join(choices, ", "), s)
		return def
	}
	return s
}

// Bool reads a boolean.
func (p *params) Bool(key string, def bool) bool {
	v, ok := p.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		p.fail(key, "must be true or false, got %v", v)
		return def
	}
	return b
}

// Rest returns the params not read so far (and marks them read).
func (p *params) Rest() map[string]any {
	out := map[string]any{}
	for k, v := range p.m {
		if !p.used[k] {
			out[k] = v
			p.used[k] = true
		}
	}
	return out
}

// done reports unknown keys and every value error.
func (p *params) done() error {
	var unknown []string
	for k := range p.m {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		known := make([]string, 0, len(p.used))
		for u := range p.used {
			known = append(known, u)
		}
		sort.Strings(known)
		if len(known) == 0 {
			p.errs = append(p.errs, fmt.Errorf("params.%s: unknown param (this fault takes none)", k))
		} else {
			p.errs = append(p.errs, fmt.Errorf("params.%s: unknown param (known: %s)", k, strings.Join(known, ", ")))
		}
	}
	return errors.Join(p.errs...)
}

func number(v any) (float64, bool) {
	f, ok := anyNumber(v)
	// NaN compares false with every bound, so a range check would let it through
	// (min_usage: .nan made kv_pool_exhaustion unprovable); ±Inf is no count or share.
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// anyNumber is v as a float64, whatever numeric type (or numeric string) it holds.
func anyNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}
