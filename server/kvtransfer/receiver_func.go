package kvtransfer

import "context"

// StartFunc is Start with the outcome handed to fn instead of the Done channel (the
// Transfer's Done is nil, and the channel is not allocated): fn runs once, on the goroutine that ended the transfer (the connection's
// reader, a timer, a canceller or Close), with no lock of the Receiver held. fn must
// not block. A caller that would otherwise park a goroutine per room on Done (decode's
// engine adapter) saves that goroutine and one wake-up per transfer.
//
// fn may run (on another goroutine) before StartFunc has returned, e.g. when the dial
// fails at once; it never runs when StartFunc returns an error.
func (r *Receiver) StartFunc(ctx context.Context, prefillAddr string, room uint64, destPages []int32, numTokens int, fn func(Result)) (*Transfer, error) {
	return r.start(ctx, prefillAddr, room, destPages, numTokens, fn)
}
