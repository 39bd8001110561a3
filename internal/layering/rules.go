package layering

// Rule forbids the packages matching From (a `go list` pattern) to depend, directly or
// through others, on the import paths Forbidden matches (an exact path, or a prefix
// ending in "/..." for a whole tree).
type Rule struct {
	From      string
	Forbidden []string
	Why       string
}

// Runner is the harness's runner package: nothing imports it but the commands that
// drive runs (Importers of the runner).
const Runner = "pdsoak/harness"

// Rules are the module's import directions (docs/DESIGN.md, "House style" 2 and
// "Wave 3": the simulator replaces IO, never rules).
var Rules = []Rule{
	{From: "./sim/...", Forbidden: []string{Runner},
		Why: "the simulator shares the runner's judging through harness/judge, below both; it never imports the runner"},
	{From: "./scenarios/...", Forbidden: []string{"pdsoak/reports/..."},
		Why: "the configuration does not depend on the verdict: the assertion grammar is in package assertion"},
	{From: "./reports", Forbidden: []string{"pdsoak/reports/render/..."},
		Why: "reports computes the figures and the verdict; reports/render draws them and imports reports, never the other way"},
	{From: "./reports/...", Forbidden: []string{"pdsoak/harness/...", "pdsoak/sim/..."},
		Why: "reports and its renderer are functions of a ledger: they never import what writes one"},
	{From: "./server/...", Forbidden: []string{"pdsoak/harness/...", "pdsoak/sim/...", "pdsoak/reports/...", "pdsoak/scenarios/..."},
		Why: "the reference server is a product of its own: the harness tests it from outside"},
	{From: "./kernels/...", Forbidden: []string{"pdsoak/server/..."},
		Why: "kernels ← server: compute backends know nothing of the server around them"},
	{From: "./chaos/...", Forbidden: []string{"pdsoak/harness/...", "pdsoak/reports/..."},
		Why: "faults are applied by the runner, not the other way round"},
	{From: "./assertion/...", Forbidden: []string{"pdsoak/reports/...", "pdsoak/scenarios/..."},
		Why: "the assertion grammar is below both scenarios (validation) and reports (evaluation)"},
}

// RunnerImporters are the only packages that may import Runner directly: the harness
// command and the gate calibration, which drives many runs the way the command does.
var RunnerImporters = map[string]bool{
	"pdsoak/harness/cli":     true,
	"pdsoak/harness/gatecal": true,
}

// MaxLines bounds every non-test .go file (house style: one idea per file).
const MaxLines = 600

// Oversize are the files over MaxLines that another change is splitting, each with who
// splits it. An entry that no longer applies fails TestFileSizes, so the list only
// shrinks: delete the entry when its file fits.
var Oversize = map[string]string{}
