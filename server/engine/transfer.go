package engine

// Transfer moves KV pages between a prefill and a decode worker (server/kvtransfer, through
// an adapter). Its methods must not block on the network: they start work and report the
// outcome later through the TransferSink given to Bind. The engine calls them only from
// its loop goroutine.
type Transfer interface {
	// Bind is called once by New, before any other method.
	Bind(sink TransferSink)
	// StartReceive (decode) registers room with the prefill bootstrap server at addr,
	// naming the destination pages, and receives the KV of the prompt's numTokens tokens
	// into the engine's KV store.
	StartReceive(room uint64, addr string, pages []int32, numTokens int)
	// StartSend (prefill) pushes the KV of the prompt's numTokens tokens, held in pages,
	// to the decode worker that registered the room, followed by firstToken (the token
	// prefill sampled). Both sides pass their own prompt length; a mismatch fails the
	// transfer.
	StartSend(room uint64, pages []int32, numTokens, firstToken int)
	// Cancel abandons whatever is in progress for room (abort, timeout); it must not
	// touch the pages after it returns.
	Cancel(room uint64)
}

// TransferSink receives transfer events; its methods are safe for concurrent use and
// never block.
type TransferSink interface {
	// Registered (prefill): decode registered room with pages destination pages.
	Registered(room uint64, pages int)
	// Received (decode): the KV of room arrived and was verified (err nil), or failed.
	Received(room uint64, firstToken int, err error)
	// Sent (prefill): the KV of room was delivered (err nil) or the send failed.
	Sent(room uint64, err error)
}
