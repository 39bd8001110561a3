package chaos

// prefill_crash SIGKILLs prefill workers. In-flight requests must fail explicitly, the
// router must stop routing to the dead worker, and after the restart (on revert) requests
// must succeed again without stale bootstrap endpoints.
func init() {
	Register(newKillType("prefill_crash", "SIGKILL prefill workers; restart them on revert", []string{"prefill"}))
}
