package chaos

// process_kill SIGKILLs any supervised process (router, workers, target.launch processes).
func init() {
	Register(newKillType("process_kill", "SIGKILL any supervised process; restart it on revert", nil))
}
