package assertion

import (
	"fmt"
	"strconv"
	"strings"
)

// AssertExplainedErrors: every explicit error has a cause other than "unexplained", and
// no target went down outside a fault and stayed down (evaluated in reports:
// explained.go). "explained_errors(rate < 0.001)" and "explained_errors(count <= 3)"
// bound the unexplained errors instead of allowing none.
const AssertExplainedErrors = "explained_errors"

// Explained reports whether a is explained_errors, with or without a bound.
func (a Assertion) Explained() bool {
	return a.Func == "" && (a.Name == AssertExplainedErrors || strings.HasPrefix(a.Name, AssertExplainedErrors+"("))
}

// parseExplained parses "explained_errors(rate < X)" / "(count OP N)"; ok is false
// when s is not explained_errors at all.
func parseExplained(raw, s string) (Assertion, bool, error) {
	rest, ok := strings.CutPrefix(s, AssertExplainedErrors+"(")
	if !ok {
		return Assertion{}, false, nil
	}
	bad := fmt.Errorf("assertion: assertion %q: want %s, %s(rate < 0.001) or %s(count <= 3)", s, AssertExplainedErrors, AssertExplainedErrors, AssertExplainedErrors)
	inner, ok := strings.CutSuffix(strings.TrimSpace(rest), ")")
	if !ok {
		return Assertion{}, true, bad
	}
	inner = strings.TrimSpace(inner)
	fn := ""
	for _, f := range []string{"rate", "count"} {
		if strings.HasPrefix(inner, f) {
			fn = f
		}
	}
	if fn == "" {
		return Assertion{}, true, bad
	}
	inner = strings.TrimSpace(inner[len(fn):])
	op := ""
	for _, o := range []string{"<=", "<"} {
		if strings.HasPrefix(inner, o) {
			op = o
			break
		}
	}
	if op == "" {
		return Assertion{}, true, fmt.Errorf("assertion: assertion %q: a bound on unexplained errors takes < or <=", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(inner[len(op):]), 64)
	switch {
	case err != nil || v != v:
		return Assertion{}, true, fmt.Errorf("assertion: assertion %q: %q is not a number", s, strings.TrimSpace(inner[len(op):]))
	case fn == "rate" && (v < 0 || v > 1):
		return Assertion{}, true, fmt.Errorf("assertion: assertion %q: a rate is a fraction between 0 and 1", s)
	case fn == "count" && (v < 0 || v != float64(int64(v))):
		return Assertion{}, true, fmt.Errorf("assertion: assertion %q: a count is a whole number ≥ 0", s)
	}
	if err := vacuous(s, fn, op, v); err != nil {
		return Assertion{}, true, err
	}
	a := Assertion{Raw: raw, Arg: fn, Op: op, Value: v}
	a.Name = fmt.Sprintf("%s(%s %s %s)", AssertExplainedErrors, fn, op, strconv.FormatFloat(v, 'g', -1, 64))
	return a, true, nil
}
