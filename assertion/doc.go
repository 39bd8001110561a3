// Package assertion is the grammar of a scenario's assertions: the built-in names and
// the threshold expressions FUNC(ARG) OP VALUE. The scenario loader (scenarios) checks
// assertions with it and the verdict (reports) evaluates what it parses, so the
// configuration never depends on the verdict.
//
// Adding a built-in assertion: its name goes in the const block and in Builtins
// (assertion.go); reports evaluates it (reports/compute.go, Builder.judge, and an alias
// in reports/grammar.go for reports' own code); scenarios/validate.go
// (checkAssertions) refuses it where a run could not evaluate it.
//
//	a, err := assertion.ParseAssertion("p99(ttft) < 2s")
//	// a.Func "p99", a.Arg "ttft", a.Op "<", a.Value 2 (seconds); a.Compare(got)
package assertion
