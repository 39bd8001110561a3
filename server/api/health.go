package api

import "net/http"

// HealthStatus is what /health answers for its process's health (nil: healthy): 200,
// or 503 with the reason. The handler and the simulated router both answer with it.
func HealthStatus(unhealthy error) int {
	if unhealthy != nil {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}
