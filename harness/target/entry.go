package target

import (
	"net/url"
	"strings"

	"pdsoak/scenarios"
)

// EntryHealth is the process that answers target.url (the one whose /health
// truthful_health judges) and its health URL, for the runner and the simulator alike.
// A launched entry is asked at its own health_url's path (vLLM's toy PD proxy serves
// /healthcheck, not /health), through target.url, the way requests reach it.
func EntryHealth(sc *scenarios.Scenario, base string) (process, healthURL string) {
	process, healthURL = "target", HealthURL(base)
	switch {
	case len(sc.Target.Launch) > 0:
		for _, l := range sc.Target.Launch {
			if l.Role == "router" || l.Role == "colocated" {
				process = l.Name
				if u, err := url.Parse(l.HealthURL); err == nil && l.HealthURL != "" && u.Path != "" {
					healthURL = strings.TrimRight(base, "/") + u.EscapedPath()
					if u.RawQuery != "" {
						healthURL += "?" + u.RawQuery
					}
				}
				break
			}
		}
	case sc.Embedded() && sc.Reference.Prefill == 0 && sc.Reference.Decode == 0:
		process = ColocatedName
	case sc.Embedded():
		process = "router"
	}
	return process, healthURL
}

// HealthURL is a base URL's /health.
func HealthURL(base string) string { return strings.TrimRight(base, "/") + "/health" }
