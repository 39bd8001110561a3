package router

// Up is a health gauge's value (pdsoak_router_healthy_pairs, pdsoak_router_worker_up):
// 1 when up, else 0. The router's collectors and the simulated router's /metrics both
// write it.
func Up(up bool) float64 {
	if up {
		return 1
	}
	return 0
}
