// Package layering holds the module's structural rules as tests, so that they are
// enforced rather than remembered:
//
//   - imports flow one way (TestImportsFlowOneWay): the simulator does not depend on the
//     runner (pdsoak/harness), scenarios not on reports, reports not on its renderer,
//     no server package on anything under harness/, and only the commands that drive
//     runs import the runner;
//   - no non-test .go file is over MaxLines lines (TestFileSizes).
//
// The rules are data (Rules, MaxLines); the test asks `go list -deps -json` for the
// module's real import graph, the one the compiler builds, rather than parsing imports
// itself. It has no code of its own beyond the rules.
package layering
