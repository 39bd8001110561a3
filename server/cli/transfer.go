package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pdsoak/kernels"
	"pdsoak/server/engine"
	"pdsoak/server/gen"
	"pdsoak/server/kvtransfer"
	"pdsoak/server/scheduler"
)

// kvTransfer adapts server/kvtransfer (a Sender on prefill, a Receiver on decode) to the
// engine.Transfer interface: the engine calls it from its loop and it never blocks on the
// network; outcomes reach the engine through the TransferSink.
//
// Token counts: both sides pass their own prompt length (from the scheduler), so decode
// registers exactly the prompt's tokens and prefill sends exactly those; kvtransfer fails
// the room when the two disagree.
//
// Semantics: in sglang mode the receiver has no bound between two frames of a room
// (SGLang does not bound the Transferring stage; the engine's transfer timeout is off
// too). Heartbeats, the dial, handshake, write and ACK bounds are transport checks and
// stay in both modes: a dead connection still fails its rooms.
type kvTransfer struct {
	role     engine.Role
	log      *slog.Logger
	sender   *kvtransfer.Sender
	receiver *kvtransfer.Receiver

	// bootstrapAddr is where decode workers dial this prefill worker.
	bootstrapAddr string

	mu    sync.Mutex
	sink  engine.TransferSink
	rooms map[uint64]*roomOp
	wg    sync.WaitGroup

	bytes   prometheus.Counter
	speed   prometheus.Gauge
	seconds prometheus.Histogram
}

// roomOp is one room in progress.
type roomOp struct {
	cancel context.CancelFunc
	xfer   *kvtransfer.Transfer // decode
	done   chan struct{}        // closed when the goroutine carrying the room ends
}

var _ engine.Transfer = (*kvTransfer)(nil)

// newTransfer builds the adapter for role. extra options (tests) apply before the ones
// the semantics mode implies, so the mode wins where both set the same bound.
func newTransfer(role engine.Role, b kernels.Backend, f *workerFlags, reg prometheus.Registerer, log *slog.Logger, extra ...kvtransfer.Option) (*kvTransfer, error) {
	t := &kvTransfer{role: role, log: log, rooms: map[uint64]*roomOp{},
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "pdsoak:kv_transfer_bytes_total",
			Help: "KV payload bytes moved by finished transfers."}),
		speed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sglang:kv_transfer_speed_gb_s",
			Help: "Speed of the last successful KV transfer in GB/s."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pdsoak:kv_transfer_seconds",
			Help:    "Duration of KV transfers.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}),
	}
	for _, c := range []prometheus.Collector{t.bytes, t.speed, t.seconds} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cli: registering transfer metrics: %w", err)
		}
	}
	opts := append([]kvtransfer.Option{kvtransfer.WithLogger(log), kvtransfer.WithOnComplete(t.onComplete)}, extra...)
	opts = append(opts, f.kvBounds(role).options()...)
	switch role {
	case rolePrefill:
		opts = append(opts,
			kvtransfer.WithOnRegister(func(r kvtransfer.Registration) {
				if s := t.getSink(); s != nil {
					s.Registered(r.Room, len(r.DestPages))
				}
			}),
			kvtransfer.WithOnAbort(func(room uint64, reason string) {
				// Decode went away while the room waited for prefill: fail the request.
				if s := t.getSink(); s != nil {
					s.Sent(room, kvtransfer.AbandonedError(room, reason))
				}
			}))
		t.sender = kvtransfer.NewSender(b.KV(), opts...)
		addr := net.JoinHostPort(f.host, strconv.Itoa(f.bootstrapPort))
		if err := t.sender.Listen(addr); err != nil {
			return nil, fmt.Errorf("cli: --disaggregation-bootstrap-port %d: %w", f.bootstrapPort, err)
		}
		t.bootstrapAddr = t.sender.Addr()
	case roleDecode:
		t.receiver = kvtransfer.NewReceiver(b.KV(), opts...)
	default:
		return nil, fmt.Errorf("cli: no KV transfer for role %q", role)
	}
	return t, nil
}

// heartbeat is the KV link's heartbeat interval and the silence after which the link is
// dead, when a flag sets either: SGLang declares its peer dead after HEARTBEAT_MAX_FAILURE
// missed heartbeats, so the idle bound is interval × max failures (at least one interval
// more than a single beat, so one late heartbeat is not a death).
func (f *workerFlags) heartbeat() (interval, idle time.Duration, ok bool) {
	if f.heartbeatInterval == 0 && f.heartbeatMaxFailure == 0 {
		return 0, 0, false
	}
	interval = time.Duration(f.heartbeatInterval)
	if interval == 0 {
		interval = kvtransfer.DefaultHeartbeatInterval
	}
	idle = kvtransfer.DefaultIdleTimeout
	if f.heartbeatMaxFailure > 0 {
		idle = interval * time.Duration(max(f.heartbeatMaxFailure, 2))
	} else if idle < 2*interval {
		idle = 2 * interval
	}
	return interval, idle, true
}

// kvBounds are the KV link's bounds the flags and the semantics mode imply, for
// newTransfer's options and for WorkerSpec (the simulator): one rule for both.
type kvBounds struct {
	progress, waiting, interval, idle time.Duration
	stale                             bool
}

func (f *workerFlags) kvBounds(role engine.Role) kvBounds {
	b := kvBounds{progress: kvtransfer.DefaultProgressTimeout, interval: kvtransfer.DefaultHeartbeatInterval,
		idle: kvtransfer.DefaultIdleTimeout}
	if f.limits.Semantics == engine.SemanticsSGLang {
		b.progress = 0 // SGLang does not bound Transferring
	}
	if interval, idle, ok := f.heartbeat(); ok {
		b.interval, b.idle = interval, idle
	}
	if role != roleDecode {
		return b
	}
	b.stale = f.limits.Bug(scheduler.BugStaleBootstrapEndpoint)
	if d := time.Duration(f.waitingTimeout); d > 0 && f.limits.Semantics == engine.SemanticsSGLang {
		// SGLANG_DISAGGREGATION_WAITING_TIMEOUT bounds KVPoll.WaitingForInput and, since
		// sglang PR #31800, KVPoll.Transferring (no frame for that long); the bug keeps
		// Transferring unbounded, as before that PR.
		b.waiting = d
		if !f.limits.Bug(scheduler.BugTransferringNeverTimesOut) {
			b.progress = d
		}
	}
	return b
}

// options are the kvtransfer options for b, only those that differ from the defaults (so
// a test's extra option for a bound the mode leaves alone stays).
func (b kvBounds) options() []kvtransfer.Option {
	var opts []kvtransfer.Option
	if b.progress != kvtransfer.DefaultProgressTimeout {
		opts = append(opts, kvtransfer.WithProgressTimeout(b.progress))
	}
	if b.waiting > 0 {
		opts = append(opts, kvtransfer.WithWaitingTimeout(b.waiting))
	}
	if b.interval != kvtransfer.DefaultHeartbeatInterval || b.idle != kvtransfer.DefaultIdleTimeout {
		opts = append(opts, kvtransfer.WithHeartbeat(b.interval, b.idle))
	}
	if b.stale {
		opts = append(opts, kvtransfer.WithStaleEndpoints(true))
	}
	return opts
}

func (t *kvTransfer) onComplete(st kvtransfer.Stats) {
	if st.Err != nil {
		return
	}
	t.bytes.Add(float64(st.Bytes))
	t.seconds.Observe(st.Duration.Seconds())
	if s := st.Duration.Seconds(); s > 0 {
		t.speed.Set(float64(st.Bytes) / s / 1e9)
	}
}

func (t *kvTransfer) getSink() engine.TransferSink {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sink
}

// Bind implements engine.Transfer.
func (t *kvTransfer) Bind(sink engine.TransferSink) {
	t.mu.Lock()
	t.sink = sink
	t.mu.Unlock()
}

// track registers a room's operation; false when the room is already in progress.
func (t *kvTransfer) track(room uint64, op *roomOp) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.rooms[room]; dup {
		return false
	}
	t.rooms[room] = op
	t.wg.Add(1)
	return true
}

func (t *kvTransfer) untrack(room uint64, op *roomOp) {
	t.mu.Lock()
	if t.rooms[room] == op {
		delete(t.rooms, room)
	}
	t.mu.Unlock()
	close(op.done)
	t.wg.Done()
}

// StartReceive implements engine.Transfer (decode).
func (t *kvTransfer) StartReceive(room uint64, addr string, pages []int32, numTokens int) {
	sink := t.getSink()
	if t.receiver == nil {
		sink.Received(room, -1, fmt.Errorf("cli: role %s cannot receive KV: %w", t.role, gen.ErrInternal))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &roomOp{cancel: cancel, done: make(chan struct{})}
	if !t.track(room, op) {
		cancel()
		sink.Received(room, -1, fmt.Errorf("cli: room %d is already receiving: %w", room, gen.ErrInvalid))
		return
	}
	// The outcome goes to the engine from whichever goroutine ended the transfer (the
	// link's reader, mostly): no goroutine per room parked on Done, one wake-up less.
	xfer, err := t.receiver.StartFunc(ctx, addr, room, pages, numTokens, func(res kvtransfer.Result) {
		t.untrack(room, op)
		cancel()
		sink.Received(room, res.FirstToken, res.Err)
	})
	if err != nil {
		t.untrack(room, op)
		cancel()
		if !errors.Is(err, gen.ErrTransfer) {
			err = fmt.Errorf("cli: starting the transfer of room %d: %w (%w)", room, gen.ErrTransfer, err)
		}
		sink.Received(room, -1, err)
		return
	}
	op.xfer = xfer
}

// StartSend implements engine.Transfer (prefill).
func (t *kvTransfer) StartSend(room uint64, pages []int32, numTokens, firstToken int) {
	sink := t.getSink()
	if t.sender == nil {
		sink.Sent(room, fmt.Errorf("cli: role %s cannot send KV: %w", t.role, gen.ErrInternal))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &roomOp{cancel: cancel, done: make(chan struct{})}
	if !t.track(room, op) {
		cancel()
		sink.Sent(room, fmt.Errorf("cli: room %d is already sending: %w", room, gen.ErrInvalid))
		return
	}
	src := append([]int32(nil), pages...)
	go func() {
		defer cancel()
		err := t.sender.Send(ctx, room, src, numTokens, firstToken)
		t.untrack(room, op)
		sink.Sent(room, err)
	}()
}

// Cancel implements engine.Transfer. On prefill it waits until the send stopped reading
// the source pages (bounded by kvtransfer's frame timeout), as the contract demands.
func (t *kvTransfer) Cancel(room uint64) {
	t.mu.Lock()
	op := t.rooms[room]
	t.mu.Unlock()
	if t.sender != nil {
		t.sender.Fail(room, "cancelled by prefill")
	}
	if op == nil {
		return
	}
	if op.xfer != nil {
		op.xfer.Cancel("cancelled by decode")
	}
	op.cancel()
	if t.sender != nil {
		<-op.done
	}
}

// Close stops the sender or receiver and waits for every room goroutine.
func (t *kvTransfer) Close() error {
	var err error
	t.mu.Lock()
	for _, op := range t.rooms {
		op.cancel()
	}
	t.mu.Unlock()
	if t.sender != nil {
		err = t.sender.Close()
	}
	if t.receiver != nil {
		err = t.receiver.Close()
	}
	t.wg.Wait()
	return err
}
