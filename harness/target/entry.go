package target

import (
	"strings"

	"pdsoak/scenarios"
)

// EntryHealth is the process that answers target.url (the one whose /health
// truthful_health judges) and its health URL, for the runner and the simulator alike.
func EntryHealth(sc *scenarios.Scenario, url string) (process, healthURL string) {
	process = "target"
	switch {
	case len(sc.Target.Launch) > 0:
		for _, l := range sc.Target.Launch {
			if l.Role == "router" || l.Role == "colocated" {
				process = l.Name
				break
			}
		}
	case sc.Embedded() && sc.Reference.Prefill == 0 && sc.Reference.Decode == 0:
		process = ColocatedName
	case sc.Embedded():
		process = "router"
	}
	return process, HealthURL(url)
}

// HealthURL is a base URL's /health.
func HealthURL(base string) string { return strings.TrimRight(base, "/") + "/health" }
