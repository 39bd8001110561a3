package chaos

// process_kill SIGKILLs any supervised process (router, workers, target.launch processes).
// Verified by the pid gone (or a zombie) and, when the process's URL is known, its server
// no longer answering (killFault).
func init() {
	Register(newKillType("process_kill", "SIGKILL any supervised process; restart it on revert", nil))
}
