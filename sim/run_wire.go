package sim

import "pdsoak/scenarios"

// newTopology is the default Options.NewServer. It is nil until the topology half
// (NewTopology) is wired in: `var newTopology = NewTopology`.
var newTopology func(*Loop, *scenarios.Scenario) (Server, error)
