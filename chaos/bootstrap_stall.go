package chaos

import "pdsoak/server/failpoint"

// bootstrap_stall holds the prefill bootstrap server while it handles decode's
// registration for a room (failpoint kvtransfer/bootstrap). Requests pile up in the
// bootstrap queue; the bootstrap timeout must fire.
func init() {
	Register(newFailpointType("bootstrap_stall",
		"stall the prefill bootstrap handshake (failpoint kvtransfer/bootstrap: pause or sleep)",
		failpoint.KVTransferBootstrap, []string{"prefill"},
		[]string{"mode=pause: pause (hold until reverted) or sleep", "delay=5s: sleep per handshake (mode sleep)"},
		stallTerms))
}
