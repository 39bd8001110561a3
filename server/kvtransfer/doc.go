// Package kvtransfer moves KV-cache pages from a prefill worker to a decode worker over
// TCP, as SGLang's PD mode does over NIXL/Mooncake: decode is the receiver and dials,
// prefill is the sender and listens on its bootstrap address.
//
// # Protocol
//
// One TCP connection per (decode, prefill) pair, opened by decode on first use and reused
// for every room; rooms are multiplexed on it at message granularity. Every message is a
// 28-byte big-endian header followed by a body:
//
//	off size field
//	 0   2   magic    0x4B56 ("KV")
//	 2   1   version  2
//	 3   1   type     (below)
//	 4   8   room     bootstrap room (0 for connection-level messages)
//	12   8   reserved 0
//	20   4   length   body bytes (≤ 1 MiB; PAGES: the table's, a multiple of 16, ≤ 1024 entries)
//	24   4   crc      CRC32C (Castagnoli) of the body
//
// Types and bodies (integers big-endian):
//
//	1 HELLO        d→p room 0   page_size u32, layers u32, bytes_per_token u32
//	2 HELLO_ACK    p→d room 0   the same, prefill's shape (must be equal)
//	3 REGISTER     d→p room R   num_tokens u32, count u32, count × dest page i32
//	4 REGISTER_ACK p→d room R   empty
//	5 PAGES        p→d room R   a table of frames: count × (page u32, layer u32, len u32,
//	                            crc u32), then the frames' payloads back to back. A frame
//	                            is the first n tokens of KVStore.LayerBytes(page, layer)
//	                            (page: index into the room's destination page list),
//	                            n = min(page_size, num_tokens − page·page_size), len its
//	                            bytes (≤ one page of the receiver), crc its CRC32C
//	6 DONE         p→d room R   first_token i32, num_tokens u32, frames u32
//	7 ACK          d→p room R   empty: every frame arrived and verified
//	8 FAIL         both room R  reason (UTF-8, ≤ 1024 bytes); room 0 closes the connection
//	9 HEARTBEAT    both room 0  empty
//
// Version 1 sent one PAGE message per frame; version 2 batches a room's frames into PAGES
// messages so that the sender writes many pages with one writev and the receiver reads
// their payloads straight into the destination pages with one readv, copying each byte
// once in user space at most (see BenchmarkTransfer).
//
// A message with a bad CRC (for PAGES, of its table), an unknown type, a bad magic or
// version, reserved bytes set or an oversized body is a protocol error and closes the
// connection (every room on it fails). A frame whose CRC does not match its payload fails
// only its room: decode reports it with FAIL and drops the room's later frames; other
// rooms continue. A room that ends while its payload is being read stops receiving it at
// once: no byte lands in its pages after Transfer.Cancel (or the room's failure) returns.
//
// # Bounds
//
// Dial (DefaultDialTimeout); HELLO→HELLO_ACK and REGISTER→REGISTER_ACK
// (DefaultHandshakeTimeout); every write (DefaultFrameTimeout); on decode, the gap between
// two frames of a room (DefaultProgressTimeout, 0 turns it off); DONE→ACK on prefill
// (DefaultAckTimeout); and liveness: each
// side sends HEARTBEAT every DefaultHeartbeatInterval and declares the connection dead
// after DefaultIdleTimeout without any message. The wait between REGISTER_ACK and the
// first frame (prefill's queue and forward pass) is bounded by the caller's context.
//
// # Use
//
// Prefill:
//
//	s := kvtransfer.NewSender(kv, kvtransfer.WithOnRegister(func(r kvtransfer.Registration) {
//		engine.Notify(r.Room) // the request may leave the bootstrap queue
//	}))
//	s.Listen("127.0.0.1:0") // s.Addr() goes into /server_info "bootstrap_addr"
//	...after the forward pass of the request in room R:
//	err := s.Send(ctx, R, srcPages, len(prompt), firstToken) // returns after decode's ACK
//	...or, when the request fails first: s.Fail(R, "aborted")
//
// Decode:
//
//	r := kvtransfer.NewReceiver(kv)
//	t, err := r.Start(ctx, bootstrapAddr, R, destPages, len(prompt)) // never blocks on I/O
//	res := <-t.Done() // res.FirstToken, or res.Err wrapping gen.ErrTransfer
//	// or StartFunc(..., fn): fn(res) runs on the goroutine that ended the transfer,
//	// so the caller parks no goroutine per room on Done (decode's engine adapter)
//
// # Room machines
//
// The room protocol itself (which rooms exist on which connection, every step's bound,
// frame accounting, DONE/ACK, FAIL, connection loss, stale endpoints and the tombstone
// ring) is two state machines with no goroutines and no sockets: RecvRooms (decode) and
// SendRooms (prefill). Their IO is a Conn (where control messages go) and, for the
// receiver's bounds, a Clock. The Receiver and Sender call them under their mutex and
// carry the bytes over TCP; the simulator (sim/link_kv.go) calls the same machines on
// its virtual clock and simulated link:
//
//	m := kvtransfer.NewRecvRooms(clock, cfg, onTimer)   // onTimer calls m.Expire
//	ep, dial, err := m.Start(&room, addr, id, pages, tokens, newEndpoint)
//	if dial { ...connect...; m.Connected(ep, conn) }     // REGISTER leaves through conn
//	...REGISTER_ACK: m.RegisterAck(ep, id); PAGES: r, dst, bad := m.Pages(ep, id, es, store, dst),
//	...read the payloads into dst, VerifyPages, m.Progress; DONE: m.Done(ep, id, d) (ACKs);
//	...FAIL: m.PeerFailed; dead: m.Lost(ep), m.End
//
// On prefill, SendRooms decides a REGISTER after the bootstrap hook (OnRegister), the
// frame layout of a Send (NumFrames, Frame) and the ACK bound after DONE (AckBound,
// AwaitAck, AckExpired: its timer ends the Send with ErrTimeout and FAILs the room).
//
// Faults: the sender calls the hook (default failpoint.Eval) with "kvtransfer/send-frame"
// before every frame ("corrupt" flips a payload byte after the CRC was computed, "drop"
// closes the connection, sleep/pause delay it; frames already batched leave with the next
// heartbeat at the latest) and "kvtransfer/bootstrap" on every
// REGISTER ("fail" refuses the room, "drop" closes the connection).
package kvtransfer
