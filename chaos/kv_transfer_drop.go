package chaos

import "pdsoak/server/failpoint"

// kv_transfer_drop makes the prefill sender close the KV connection before a frame
// (failpoint kvtransfer/send-frame returns "drop"). Decode must fail the request, not wait.
func init() {
	Register(newFailpointType("kv_transfer_drop",
		"close KV transfer connections mid-transfer (failpoint kvtransfer/send-frame: return(drop))",
		failpoint.KVTransferSendFrame, []string{"prefill"},
		[]string{"count=0: drop this many frames, then stop (0: every frame)", "probability=100: percent of frames dropped"},
		func(p *params) string { return fireTerms(p, "return(drop)") }))
}
