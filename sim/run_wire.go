package sim

// newTopology is the default Options.NewServer: the simulated reference topology.
// A variable so tests can swap in a fake Server.
var newTopology = NewTopology
