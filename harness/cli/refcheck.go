package cli

import servercli "pdsoak/server/cli"

// referenceCheck checks the embedded reference server's flags with the server's own
// flag code (see scenarios.WithReferenceCheck).
func referenceCheck(role string, args []string) error {
	if role == "router" {
		return servercli.CheckRouterArgs(args)
	}
	return servercli.CheckWorkerArgs(role, args)
}
