package kvtransfer

import (
	"context"
	"log/slog"
	"time"

	"pdsoak/server/failpoint"
)

// Defaults of the timeouts. Every step of the protocol is bounded by one of them.
const (
	// DefaultDialTimeout bounds the TCP dial from decode to prefill.
	DefaultDialTimeout = 3 * time.Second
	// DefaultHandshakeTimeout bounds HELLO→HELLO_ACK and REGISTER→REGISTER_ACK.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultFrameTimeout bounds writing one message (both sides).
	DefaultFrameTimeout = 10 * time.Second
	// DefaultProgressTimeout bounds, on decode, the gap between two frames of a room once
	// its first frame has arrived (a sender that stalls mid-room while its heartbeats
	// still flow).
	DefaultProgressTimeout = 10 * time.Second
	// DefaultHeartbeatInterval is how often each side sends HEARTBEAT.
	DefaultHeartbeatInterval = 1 * time.Second
	// DefaultIdleTimeout is how long a side waits for any message before it declares the
	// connection dead (a few heartbeats).
	DefaultIdleTimeout = 5 * time.Second
	// DefaultAckTimeout bounds prefill's wait for ACK after DONE.
	DefaultAckTimeout = 10 * time.Second
	// DefaultTombstones is how many failed rooms the sender remembers so that a late
	// REGISTER for a room prefill already failed is answered with FAIL at once.
	DefaultTombstones = 4096
)

// Registration is what decode told prefill about a room.
type Registration struct {
	Room      uint64
	NumTokens int
	DestPages []int32
	Peer      string // decode's remote address
}

// Stats describes one finished transfer (successful or not), for metrics.
type Stats struct {
	Room     uint64
	Bytes    int64 // payload bytes moved
	Frames   int
	Duration time.Duration // first frame to ACK (sender) or Start to done (receiver)
	Err      error
}

// Hook is called at the named points of the protocol ("kvtransfer/send-frame" before every
// page frame the sender writes, "kvtransfer/bootstrap" when the sender receives a
// REGISTER). It has failpoint.Eval's contract: ("", nil) means carry on; a returned
// argument asks for a fault: "corrupt" (send-frame: flip a payload byte after the CRC is
// computed), "drop" (close the connection), "fail" (bootstrap: refuse the room); an error
// fails the room.
type Hook func(ctx context.Context, name string) (string, error)

// Hook points.
const (
	HookSendFrame = failpoint.KVTransferSendFrame
	HookBootstrap = failpoint.KVTransferBootstrap
)

// The faults a hook's argument asks for (the chaos catalogue's return(...) terms; the
// simulator's KV link reads the same words).
const (
	HookCorrupt = "corrupt" // send-frame: flip a payload byte after the CRC is computed
	HookDrop    = "drop"    // close the connection
	HookFail    = "fail"    // bootstrap: refuse the room
)

type config struct {
	// staleEndpoints keeps a dead connection to a prefill cached (the
	// stale-bootstrap-endpoint bug, sgl-project/sglang#33789).
	staleEndpoints    bool
	waitingTimeout    time.Duration
	dialTimeout       time.Duration
	handshakeTimeout  time.Duration
	frameTimeout      time.Duration
	progressTimeout   time.Duration
	heartbeatInterval time.Duration
	idleTimeout       time.Duration
	ackTimeout        time.Duration
	tombstones        int
	hook              Hook
	logger            *slog.Logger
	onRegister        func(Registration)
	onAbort           func(room uint64, reason string)
	onComplete        func(Stats)
}

func newConfig(opts []Option) config {
	c := config{
		dialTimeout:       DefaultDialTimeout,
		handshakeTimeout:  DefaultHandshakeTimeout,
		frameTimeout:      DefaultFrameTimeout,
		progressTimeout:   DefaultProgressTimeout,
		heartbeatInterval: DefaultHeartbeatInterval,
		idleTimeout:       DefaultIdleTimeout,
		ackTimeout:        DefaultAckTimeout,
		tombstones:        DefaultTombstones,
		hook:              failpoint.Eval,
		logger:            slog.Default(),
	}
	for _, o := range opts {
		o(&c)
	}
	if c.frameTimeout <= 0 {
		c.frameTimeout = DefaultFrameTimeout
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Option configures a Sender or a Receiver.
type Option func(*config)

// WithDialTimeout bounds the dial (receiver).
// WithStaleEndpoints reproduces sgl-project/sglang#33789 on a Receiver: once its
// connection to a prefill bootstrap address dies, the dead connection stays cached for
// that address, so later rooms are registered on it and time out waiting for
// REGISTER_ACK, until the process restarts.
func WithStaleEndpoints(on bool) Option { return func(c *config) { c.staleEndpoints = on } }

// WithWaitingTimeout bounds, on a Receiver, the wait between REGISTER_ACK and the first
// frame of a room (SGLang's KVPoll.WaitingForInput and its
// SGLANG_DISAGGREGATION_WAITING_TIMEOUT). 0, the default, leaves that wait to the engine.
func WithWaitingTimeout(d time.Duration) Option { return func(c *config) { c.waitingTimeout = d } }

func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// WithHandshakeTimeout bounds HELLO and REGISTER round trips (receiver).
func WithHandshakeTimeout(d time.Duration) Option {
	return func(c *config) { c.handshakeTimeout = d }
}

// WithFrameTimeout bounds each message write (both sides; must be > 0).
func WithFrameTimeout(d time.Duration) Option { return func(c *config) { c.frameTimeout = d } }

// WithProgressTimeout bounds the gap between two frames of a room on the receiver; 0
// disables it (SGLang has no bound on a transfer in progress; heartbeats still detect a
// dead connection).
func WithProgressTimeout(d time.Duration) Option { return func(c *config) { c.progressTimeout = d } }

// WithHeartbeat sets the heartbeat interval and the idle timeout after which a silent
// connection is declared dead (both sides).
func WithHeartbeat(interval, idle time.Duration) Option {
	return func(c *config) { c.heartbeatInterval, c.idleTimeout = interval, idle }
}

// WithAckTimeout bounds the sender's wait for ACK after DONE.
func WithAckTimeout(d time.Duration) Option { return func(c *config) { c.ackTimeout = d } }

// WithHook replaces the fault hook (default failpoint.Eval; nil disables hooks).
func WithHook(h Hook) Option { return func(c *config) { c.hook = h } }

// WithLogger sets the structured logger (nil discards).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithOnRegister is called (sender) when decode registers a room. It runs on the
// connection's reader goroutine and must not block.
func WithOnRegister(f func(Registration)) Option { return func(c *config) { c.onRegister = f } }

// WithOnAbort is called (sender) when a registered room that no Send is carrying is
// failed by decode (FAIL) or lost with its connection. It must not block.
func WithOnAbort(f func(room uint64, reason string)) Option {
	return func(c *config) { c.onAbort = f }
}

// WithOnComplete is called (both sides) when a transfer finishes, with its size and
// duration, for metrics. It must not block.
func WithOnComplete(f func(Stats)) Option { return func(c *config) { c.onComplete = f } }

// WithTombstones sets how many failed rooms the sender remembers (default
// DefaultTombstones).
func WithTombstones(n int) Option { return func(c *config) { c.tombstones = n } }

func (c *config) eval(ctx context.Context, name string) (string, error) {
	if c.hook == nil {
		return "", nil
	}
	return c.hook(ctx, name)
}
