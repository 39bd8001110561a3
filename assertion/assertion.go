package assertion

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"pdsoak/ledger"
	"pdsoak/suggest"
)

// Built-in assertion names.
const (
	AssertNoSilentDrops  = "no_silent_drops" // no request ended stalled or deadline_exceeded
	AssertValidResponses = "valid_responses" // no request ended invalid or truncated
	AssertNoLeaks        = "no_leaks"        // the leak check after drain passed
	AssertRecovery       = "recovery"        // success rate recovered after every fault
	// AssertConsistentOutputs: every answer to a probe prompt (workload type probe) agrees
	// with that probe's first answer; "consistent_outputs(N)" compares only the first N
	// characters, tolerating later differences (GPU batching can change late tokens).
	AssertConsistentOutputs = "consistent_outputs"
)

// Builtins lists the built-in assertion names.
var Builtins = []string{AssertNoSilentDrops, AssertValidResponses, AssertNoLeaks, AssertRecovery, AssertConsistentOutputs,
	AssertExplainedErrors, AssertPDPath, AssertTruthfulHealth} // pdpath.go

// Assertion is a parsed assertion: a built-in name, or a threshold expression
// FUNC(ARG) OP VALUE where
//
//	FUNC(ARG)   p50|p90|p95|p99|max|mean ( ttft|itl|e2e )   VALUE a duration (2s, 250ms; a bare number other than 0 is an error)
//	            rate ( OUTCOME|silent_drops )            VALUE a fraction of all requests
//	            count ( OUTCOME|silent_drops )           VALUE a whole number
//	OP          < <= > >= == !=
type Assertion struct {
	Raw   string
	Name  string  // the built-in name, or the normalised expression
	Func  string  // p50, p90, p95, p99, max, mean, rate, count; empty for built-ins
	Arg   string  // ttft, itl, e2e, or an outcome / silent_drops
	Op    string  // comparison operator
	Value float64 // seconds for latencies, a fraction for rate, a count for count
	// Prefix (consistent_outputs(N)) is how many leading characters of a probe's
	// answers must agree; 0 compares whole answers.
	Prefix int
}

// Consistent reports whether a is consistent_outputs, with or without a prefix.
func (a Assertion) Consistent() bool {
	return a.Func == "" && strings.HasPrefix(a.Name, AssertConsistentOutputs)
}

// Builtin reports whether a is a built-in name rather than a threshold expression.
func (a Assertion) Builtin() bool { return a.Func == "" }

// Latency reports whether a is a latency threshold (p50, p90, p95, p99, max or mean of
// ttft, itl or e2e).
func (a Assertion) Latency() bool { return latencyFuncs[a.Func] }

// Compare applies the operator to (got, a.Value).
func (a Assertion) Compare(got float64) bool {
	switch a.Op {
	case "<":
		return got < a.Value
	case "<=":
		return got <= a.Value
	case ">":
		return got > a.Value
	case ">=":
		return got >= a.Value
	case "==":
		return got == a.Value
	case "!=":
		return got != a.Value
	}
	return false
}

// The threshold vocabulary, in the order error messages list it.
var (
	latencyFuncList = []string{"p50", "p90", "p95", "p99", "max", "mean"}
	latencyArgList  = []string{"ttft", "itl", "e2e"}
	funcList        = append(append([]string{}, latencyFuncList...), "rate", "count")
	latencyFuncs    = setOf(latencyFuncList)
	latencyArgs     = setOf(latencyArgList)
)

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// countArgs are what rate() and count() take: an outcome or silent_drops.
func countArgs() []string {
	out := make([]string, 0, len(ledger.Outcomes)+1)
	for _, o := range ledger.Outcomes {
		out = append(out, string(o))
	}
	return append(out, "silent_drops")
}

// ParseAssertion parses a built-in name or a threshold expression.
func ParseAssertion(s string) (Assertion, error) {
	raw := s
	s = strings.TrimSpace(s)
	if a, ok, err := parsePDPath(raw, s); ok { // pd_path and pd_path(MIN_SHARE): pdpath.go
		return a, err
	}
	for _, b := range Builtins {
		if s == b {
			return Assertion{Raw: raw, Name: b}, nil
		}
	}
	if a, ok, err := parseExplained(raw, s); ok {
		return a, err
	}
	if rest, ok := strings.CutPrefix(s, AssertConsistentOutputs+"("); ok {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(rest, ")")))
		if !strings.HasSuffix(rest, ")") || err != nil || n < 0 {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: want %s(N), N the number of leading characters that must agree (≥ 0)", s, AssertConsistentOutputs)
		}
		return Assertion{Raw: raw, Name: fmt.Sprintf("%s(%d)", AssertConsistentOutputs, n), Prefix: n}, nil
	}
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return Assertion{}, fmt.Errorf("assertion: unknown assertion %q%s (built-ins: %s; or an expression such as \"p99(ttft) < 2s\")", s, didYouMean(s, Builtins), strings.Join(Builtins, ", "))
	}
	fn := strings.TrimSpace(s[:open])
	closing := strings.IndexByte(s, ')')
	if closing < open {
		return Assertion{}, fmt.Errorf("assertion: assertion %q: missing ')'", s)
	}
	arg := strings.TrimSpace(s[open+1 : closing])
	rest := strings.TrimSpace(s[closing+1:])
	op := ""
	for _, o := range []string{"<=", ">=", "==", "!=", "<", ">"} {
		if strings.HasPrefix(rest, o) {
			op = o
			break
		}
	}
	if op == "" {
		return Assertion{}, fmt.Errorf("assertion: assertion %q: want an operator (< <= > >= == !=) after %s(%s)", s, fn, arg)
	}
	val := strings.TrimSpace(rest[len(op):])
	if val == "" {
		return Assertion{}, fmt.Errorf("assertion: assertion %q: missing value after %s", s, op)
	}
	a := Assertion{Raw: raw, Func: fn, Arg: arg, Op: op}
	switch {
	case latencyFuncs[fn]:
		if !latencyArgs[arg] {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: %s() takes ttft, itl or e2e, not %q%s", s, fn, arg, didYouMean(arg, latencyArgList))
		}
		v, err := parseSeconds(val)
		if err != nil {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: %w", s, err)
		}
		a.Value = v
	case fn == "rate" || fn == "count":
		if arg != "silent_drops" && !ledger.Outcome(arg).Valid() {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: %s() takes an outcome (%s) or silent_drops, not %q%s", s, fn, outcomeList(), arg, didYouMean(arg, countArgs()))
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v != v {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: %q is not a number", s, val)
		}
		if fn == "rate" && (v < 0 || v > 1) {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: a rate is a fraction between 0 and 1", s)
		}
		if fn == "count" && (v < 0 || v != float64(int64(v))) {
			return Assertion{}, fmt.Errorf("assertion: assertion %q: a count is a whole number ≥ 0", s)
		}
		a.Value = v
	default:
		return Assertion{}, fmt.Errorf("assertion: assertion %q: unknown function %q%s (want p50, p90, p95, p99, max, mean, rate or count)", s, fn, didYouMean(fn, funcList))
	}
	kind := map[bool]string{true: "latency", false: fn}[latencyFuncs[fn]]
	if err := vacuous(s, kind, op, a.Value); err != nil {
		return Assertion{}, err
	}
	a.Name = a.String()
	return a, nil
}

// String is the normalised expression, e.g. "p99(ttft) < 2s".
func (a Assertion) String() string {
	if a.Builtin() {
		return a.Name
	}
	v := strconv.FormatFloat(a.Value, 'g', -1, 64)
	if latencyFuncs[a.Func] {
		v = time.Duration(a.Value * float64(time.Second)).String()
	}
	return fmt.Sprintf("%s(%s) %s %s", a.Func, a.Arg, a.Op, v)
}

// vacuous refuses a bound that every run meets (it can never fail) or none does (it
// can never pass): kind is latency, count (never below 0) or rate (nor above 1).
func vacuous(s, kind, op string, v float64) error {
	hi := math.Inf(1)
	if kind == "rate" {
		hi = 1
	}
	switch {
	case op == ">=" && v <= 0:
		return fmt.Errorf("assertion: assertion %q: can never fail (a %s is never below 0); tighten the bound or remove it", s, kind)
	case op == "<=" && v >= hi:
		return fmt.Errorf("assertion: assertion %q: can never fail (a %s is never above 1); tighten the bound or remove it", s, kind)
	case op == "<" && v <= 0:
		return fmt.Errorf("assertion: assertion %q: can never pass (a %s is never below 0)", s, kind)
	case op == ">" && v >= hi:
		return fmt.Errorf("assertion: assertion %q: can never pass (a %s is never above 1)", s, kind)
	}
	return nil
}

func parseSeconds(v string) (float64, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("negative duration %q", v)
		}
		return d.Seconds(), nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
		return 0, nil
	} else if err == nil {
		// A bare number is ambiguous (seconds? milliseconds?): say which, like a duration.
		return 0, fmt.Errorf("%q has no unit: write a duration such as %ss or %sms", v, v, v)
	}
	return 0, fmt.Errorf("%q is not a duration (2s, 250ms)", v)
}

func outcomeList() string {
	s := make([]string, len(ledger.Outcomes))
	for i, o := range ledger.Outcomes {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to s, or "".
func didYouMean(s string, candidates []string) string {
	if best := suggest.Closest(s, candidates); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
