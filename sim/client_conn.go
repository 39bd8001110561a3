package sim

import "errors"

// Connection-level failures a topology can report where the real client would see no
// HTTP answer at all (the front end's process is gone, or its connection is cut).
var (
	// ErrConnRefused, returned by Server.Submit, is a front end that does not accept
	// connections (its process crashed): the client's transport_error in the connect
	// phase.
	ErrConnRefused = errors.New("sim: connection refused")
	// ErrConnReset, as a Done event's Err, is the connection cut under the request: a
	// transport_error before the response headers, a truncated stream after them.
	ErrConnReset = errors.New("sim: connection reset by peer")
)
