package reports

import "pdsoak/assertion"

// The assertion grammar lives in package assertion (below scenarios and reports);
// reports evaluates what it parses under the names it always used.

// Assertion is a parsed assertion (assertion.Assertion).
type Assertion = assertion.Assertion

// Built-in assertion names (see package assertion).
const (
	AssertNoSilentDrops     = assertion.AssertNoSilentDrops
	AssertValidResponses    = assertion.AssertValidResponses
	AssertNoLeaks           = assertion.AssertNoLeaks
	AssertRecovery          = assertion.AssertRecovery
	AssertConsistentOutputs = assertion.AssertConsistentOutputs
)

// ParseAssertion parses a built-in name or a threshold expression
// (assertion.ParseAssertion).
func ParseAssertion(s string) (Assertion, error) { return assertion.ParseAssertion(s) }
