package chaos

import "pdsoak/server/failpoint"

// kv_transfer_stall holds the prefill sender before each KV frame (failpoint
// kvtransfer/send-frame): pause holds until the fault is reverted, sleep delays each frame.
// Decode's transfer queue fills; strict semantics must time the transfer out.
func init() {
	Register(newFailpointType("kv_transfer_stall",
		"stall KV frames on the prefill sender (failpoint kvtransfer/send-frame: pause or sleep)",
		failpoint.KVTransferSendFrame, []string{"prefill"},
		[]string{"mode=pause: pause (hold until reverted) or sleep", "delay=5s: sleep per frame (mode sleep)"},
		stallTerms))
}
