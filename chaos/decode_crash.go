package chaos

// decode_crash SIGKILLs decode workers. Streams in flight must end with an error, never
// hang; prefill must free the KV it held for the dead decode.
func init() {
	Register(newKillType("decode_crash", "SIGKILL decode workers; restart them on revert", []string{"decode"}))
}
