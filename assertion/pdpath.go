package assertion

import (
	"fmt"
	"strconv"
	"strings"
)

// pd_path and truthful_health (evaluated in reports: pdpath.go, health.go).
const (
	// AssertPDPath is "pd_path" or "pd_path(MIN_SHARE)": of the requests completed ok,
	// the share that went through a prefill worker, from the prefill processes' counters.
	AssertPDPath = "pd_path"
	// DefaultPDMinShare is pd_path's minimum share without an argument.
	DefaultPDMinShare = 0.99
	// AssertTruthfulHealth fails on any health_lies finding.
	AssertTruthfulHealth = "truthful_health"
)

// PDPath reports whether a is pd_path, with or without a minimum share.
func (a Assertion) PDPath() bool {
	return a.Func == "" && (a.Name == AssertPDPath || strings.HasPrefix(a.Name, AssertPDPath+"("))
}

// parsePDPath parses pd_path and pd_path(MIN_SHARE); ok is false when s is neither.
func parsePDPath(raw, s string) (a Assertion, ok bool, err error) {
	if s == AssertPDPath {
		return Assertion{Raw: raw, Name: AssertPDPath, Value: DefaultPDMinShare}, true, nil
	}
	rest, found := strings.CutPrefix(s, AssertPDPath+"(")
	if !found {
		return Assertion{}, false, nil
	}
	v, perr := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(rest, ")")), 64)
	if !strings.HasSuffix(rest, ")") || perr != nil || !(v > 0 && v <= 1) {
		return Assertion{}, true, fmt.Errorf("assertion: assertion %q: want %s(MIN_SHARE), MIN_SHARE the least share of ok requests that went through a prefill worker, in (0, 1]", s, AssertPDPath)
	}
	return Assertion{Raw: raw, Name: fmt.Sprintf("%s(%s)", AssertPDPath, strconv.FormatFloat(v, 'g', -1, 64)), Value: v}, true, nil
}
