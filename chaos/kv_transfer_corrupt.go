package chaos

import "pdsoak/server/failpoint"

// kv_transfer_corrupt flips a payload byte of a KV frame after its checksum was computed
// (failpoint kvtransfer/send-frame returns "corrupt"). Decode must detect it (I5) and fail
// the request instead of generating from corrupt KV.
func init() {
	Register(newFailpointType("kv_transfer_corrupt",
		"corrupt KV frames after checksumming (failpoint kvtransfer/send-frame: return(corrupt))",
		failpoint.KVTransferSendFrame, []string{"prefill"},
		[]string{"count=0: corrupt this many frames (0: every frame)", "probability=100: percent of frames corrupted"},
		func(p *params) string { return fireTerms(p, "return(corrupt)") }))
}
