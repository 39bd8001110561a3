package kvtransfer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"pdsoak/server/gen"
)

// Wire constants. See doc.go for the format.
const (
	// Magic opens every message header ("KV").
	Magic uint16 = 0x4B56
	// Version is the protocol version carried in every header. 2: page frames travel in
	// PAGES batches (a table of entries, then their payloads) instead of one PAGE message
	// each.
	Version uint8 = 2
	// HeaderSize is the fixed size of a message header in bytes.
	HeaderSize = 28
	// MaxBody bounds one page frame (one (page, layer) slice).
	MaxBody = 64 << 20
	// MaxControlBody bounds the body of any message (for PAGES, its table).
	MaxControlBody = 1 << 20
	// EntrySize is the size of one entry of a PAGES table.
	EntrySize = 16
	// MaxEntries bounds the entries of one PAGES message.
	MaxEntries = 1024
	// MaxReason bounds the reason text of a FAIL message.
	MaxReason = 1024
)

// MsgType is the type byte of a message header.
type MsgType uint8

// Message types.
const (
	MsgHello       MsgType = 1  // decode -> prefill, room 0: KV shape
	MsgHelloAck    MsgType = 2  // prefill -> decode, room 0: KV shape
	MsgRegister    MsgType = 3  // decode -> prefill: token count and destination pages
	MsgRegisterAck MsgType = 4  // prefill -> decode: room known
	MsgPages       MsgType = 5  // prefill -> decode: a table of (page, layer) frames, then their payloads
	MsgDone        MsgType = 6  // prefill -> decode: all frames sent, first token
	MsgAck         MsgType = 7  // decode -> prefill: every frame received and verified
	MsgFail        MsgType = 8  // either way: the room (or, with room 0, the connection) failed
	MsgHeartbeat   MsgType = 9  // either way, room 0
	msgTypeMax     MsgType = 10 // one past the last valid type
)

var msgNames = [...]string{"", "HELLO", "HELLO_ACK", "REGISTER", "REGISTER_ACK", "PAGES", "DONE", "ACK", "FAIL", "HEARTBEAT"}

func (t MsgType) String() string {
	if t > 0 && t < msgTypeMax {
		return msgNames[t]
	}
	return fmt.Sprintf("MsgType(%d)", uint8(t))
}

// Errors. Every error a decode-side Transfer ends with wraps gen.ErrTransfer.
var (
	// ErrProtocol is a malformed message; the connection carrying it is closed.
	ErrProtocol = fmt.Errorf("kvtransfer: protocol error: %w", gen.ErrTransfer)
	// ErrChecksum is a page frame whose CRC32C does not match its payload; only its room fails.
	ErrChecksum = fmt.Errorf("kvtransfer: checksum mismatch: %w", gen.ErrTransfer)
	// ErrTimeout is a step that did not finish within its bound.
	ErrTimeout = fmt.Errorf("kvtransfer: timeout: %w", gen.ErrTransfer)
	// ErrPeer is a failure reported by the other side (a FAIL message).
	ErrPeer = fmt.Errorf("kvtransfer: peer failed the room: %w", gen.ErrTransfer)
	// ErrConnection is a broken connection (reset, closed, heartbeat lost).
	ErrConnection = fmt.Errorf("kvtransfer: connection lost: %w", gen.ErrTransfer)
	// ErrClosed is an operation on a closed Sender or Receiver.
	ErrClosed = fmt.Errorf("kvtransfer: closed: %w", gen.ErrTransfer)
	// ErrShape is a KV store shape that differs between prefill and decode, or pages that
	// do not fit the request.
	ErrShape = fmt.Errorf("kvtransfer: KV shape mismatch: %w", gen.ErrTransfer)
	// ErrDuplicate is a second registration or Send for a room already in progress.
	ErrDuplicate = fmt.Errorf("kvtransfer: room already in progress: %w", gen.ErrTransfer)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C (Castagnoli) of b, as carried in every header.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Header is the fixed 28-byte header of every message. Bytes 12 to 19 are reserved (zero).
type Header struct {
	Type MsgType
	Room uint64
	Len  uint32 // body length (PAGES: the table's; the payloads follow it)
	CRC  uint32 // CRC32C of the body
}

// Put encodes h into b[:HeaderSize].
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint16(b[0:], Magic)
	b[2] = Version
	b[3] = byte(h.Type)
	binary.BigEndian.PutUint64(b[4:], h.Room)
	clear(b[12:20])
	binary.BigEndian.PutUint32(b[20:], h.Len)
	binary.BigEndian.PutUint32(b[24:], h.CRC)
}

// ParseHeader decodes and validates a header: magic, version, type, body bound, the
// reserved bytes and the fields that must be zero for the type.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: short header (%d bytes)", ErrProtocol, len(b))
	}
	if m := binary.BigEndian.Uint16(b[0:]); m != Magic {
		return Header{}, fmt.Errorf("%w: bad magic %#04x", ErrProtocol, m)
	}
	if b[2] != Version {
		return Header{}, fmt.Errorf("%w: unsupported version %d", ErrProtocol, b[2])
	}
	h := Header{
		Type: MsgType(b[3]),
		Room: binary.BigEndian.Uint64(b[4:]),
		Len:  binary.BigEndian.Uint32(b[20:]),
		CRC:  binary.BigEndian.Uint32(b[24:]),
	}
	if h.Type == 0 || h.Type >= msgTypeMax {
		return Header{}, fmt.Errorf("%w: unknown message type %d", ErrProtocol, b[3])
	}
	if h.Len > MaxControlBody {
		return Header{}, fmt.Errorf("%w: %s body of %d bytes exceeds %d", ErrProtocol, h.Type, h.Len, MaxControlBody)
	}
	if binary.BigEndian.Uint64(b[12:]) != 0 {
		return Header{}, fmt.Errorf("%w: %s with reserved bytes set", ErrProtocol, h.Type)
	}
	if h.Type == MsgPages && (h.Len == 0 || h.Len%EntrySize != 0 || h.Len > MaxEntries*EntrySize) {
		return Header{}, fmt.Errorf("%w: PAGES table of %d bytes", ErrProtocol, h.Len)
	}
	connLevel := h.Type == MsgHello || h.Type == MsgHelloAck || h.Type == MsgHeartbeat
	if connLevel && h.Room != 0 {
		return Header{}, fmt.Errorf("%w: %s with room %d", ErrProtocol, h.Type, h.Room)
	}
	if !connLevel && h.Type != MsgFail && h.Room == 0 {
		return Header{}, fmt.Errorf("%w: %s without a room", ErrProtocol, h.Type)
	}
	return h, nil
}

// ReadMessage reads one header and its body into buf (grown as needed) and verifies the
// body's CRC. The returned body aliases buf. A PAGES message's payloads follow its body
// (the table, ParseEntries) and are not read.
func ReadMessage(r io.Reader, buf []byte) (Header, []byte, []byte, error) {
	h, err := readHeader(r)
	if err != nil {
		return h, nil, buf, err
	}
	if cap(buf) < int(h.Len) {
		buf = make([]byte, h.Len)
	}
	body := buf[:h.Len]
	if _, err := io.ReadFull(r, body); err != nil {
		return h, nil, buf, bodyErr(err)
	}
	if Checksum(body) != h.CRC {
		return h, nil, buf, fmt.Errorf("%w: %s body checksum mismatch", ErrProtocol, h.Type)
	}
	return h, body, buf, nil
}

func readHeader(r io.Reader) (Header, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(hb[:])
}

// bodyErr reports a body cut short as such: EOF after a header is never a clean end.
func bodyErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Entry is one page frame of a PAGES message: its payload is the first Len bytes of
// KVStore.LayerBytes(destination page Page, Layer), and CRC its CRC32C.
type Entry struct {
	Page  uint32 // index into the room's destination page list
	Layer uint32
	Len   uint32
	CRC   uint32
}

// AppendEntry appends one 16-byte table entry: page, layer, len, crc (u32 each).
func AppendEntry(b []byte, e Entry) []byte {
	b = binary.BigEndian.AppendUint32(b, e.Page)
	b = binary.BigEndian.AppendUint32(b, e.Layer)
	b = binary.BigEndian.AppendUint32(b, e.Len)
	return binary.BigEndian.AppendUint32(b, e.CRC)
}

// ParseEntries decodes a PAGES table into es (reused). Every payload must be at most
// maxPage bytes (the receiver's page; MaxBody at most).
func ParseEntries(b []byte, es []Entry, maxPage uint32) ([]Entry, error) {
	if len(b) == 0 || len(b)%EntrySize != 0 || len(b) > MaxEntries*EntrySize {
		return es, fmt.Errorf("%w: PAGES table of %d bytes", ErrProtocol, len(b))
	}
	maxPage = min(maxPage, MaxBody)
	es = es[:0]
	for ; len(b) > 0; b = b[EntrySize:] {
		e := Entry{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])}
		if e.Len > maxPage {
			return es, fmt.Errorf("%w: page frame of %d bytes exceeds %d", ErrProtocol, e.Len, maxPage)
		}
		es = append(es, e)
	}
	return es, nil
}

// Shape is the KV layout both sides must share (HELLO / HELLO_ACK body).
type Shape struct {
	PageSize      uint32
	Layers        uint32
	BytesPerToken uint32 // per layer
}

func (s Shape) String() string {
	return fmt.Sprintf("page_size=%d layers=%d bytes_per_token=%d", s.PageSize, s.Layers, s.BytesPerToken)
}

// AppendShape appends the 12-byte HELLO body.
func AppendShape(b []byte, s Shape) []byte {
	b = binary.BigEndian.AppendUint32(b, s.PageSize)
	b = binary.BigEndian.AppendUint32(b, s.Layers)
	return binary.BigEndian.AppendUint32(b, s.BytesPerToken)
}

// ParseShape decodes a HELLO / HELLO_ACK body.
func ParseShape(b []byte) (Shape, error) {
	if len(b) != 12 {
		return Shape{}, fmt.Errorf("%w: hello body of %d bytes", ErrProtocol, len(b))
	}
	s := Shape{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])}
	if s.PageSize == 0 || s.Layers == 0 || s.BytesPerToken == 0 {
		return Shape{}, fmt.Errorf("%w: hello with zero shape %s", ErrProtocol, s)
	}
	if uint64(s.PageSize)*uint64(s.BytesPerToken) > MaxBody {
		return Shape{}, fmt.Errorf("%w: hello page of %d bytes exceeds %d", ErrProtocol,
			uint64(s.PageSize)*uint64(s.BytesPerToken), MaxBody)
	}
	return s, nil
}

// Register is the REGISTER body: how many tokens prefill will send and where they go.
type Register struct {
	NumTokens uint32
	Pages     []int32
}

// AppendRegister appends a REGISTER body: num_tokens u32, count u32, count × page i32.
func AppendRegister(b []byte, r Register) []byte {
	b = binary.BigEndian.AppendUint32(b, r.NumTokens)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Pages)))
	for _, p := range r.Pages {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
	}
	return b
}

// ParseRegister decodes a REGISTER body. Pages must be non-negative and cover NumTokens
// for some page size, which the caller checks against its shape.
func ParseRegister(b []byte) (Register, error) {
	if len(b) < 8 {
		return Register{}, fmt.Errorf("%w: register body of %d bytes", ErrProtocol, len(b))
	}
	r := Register{NumTokens: binary.BigEndian.Uint32(b)}
	n := binary.BigEndian.Uint32(b[4:])
	if uint64(len(b)-8) != uint64(n)*4 {
		return Register{}, fmt.Errorf("%w: register says %d pages in %d bytes", ErrProtocol, n, len(b)-8)
	}
	if r.NumTokens == 0 || n == 0 {
		return Register{}, fmt.Errorf("%w: register with %d tokens and %d pages", ErrProtocol, r.NumTokens, n)
	}
	r.Pages = make([]int32, n)
	for i := range r.Pages {
		p := int32(binary.BigEndian.Uint32(b[8+4*i:]))
		if p < 0 {
			return Register{}, fmt.Errorf("%w: register with negative page %d", ErrProtocol, p)
		}
		r.Pages[i] = p
	}
	return r, nil
}

// Done is the DONE body: the first generated token and what prefill sent.
type Done struct {
	FirstToken int32
	NumTokens  uint32
	Frames     uint32
}

// AppendDone appends a DONE body: first_token i32, num_tokens u32, frames u32.
func AppendDone(b []byte, d Done) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(d.FirstToken))
	b = binary.BigEndian.AppendUint32(b, d.NumTokens)
	return binary.BigEndian.AppendUint32(b, d.Frames)
}

// ParseDone decodes a DONE body.
func ParseDone(b []byte) (Done, error) {
	if len(b) != 12 {
		return Done{}, fmt.Errorf("%w: done body of %d bytes", ErrProtocol, len(b))
	}
	d := Done{int32(binary.BigEndian.Uint32(b)), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])}
	if d.FirstToken < 0 {
		return Done{}, fmt.Errorf("%w: done with negative first token %d", ErrProtocol, d.FirstToken)
	}
	return d, nil
}

// ParseFail decodes a FAIL body (the reason, UTF-8 text, at most MaxReason bytes).
func ParseFail(b []byte) (string, error) {
	if len(b) > MaxReason {
		return "", fmt.Errorf("%w: fail reason of %d bytes", ErrProtocol, len(b))
	}
	return string(b), nil
}

func clipReason(s string) string {
	if len(s) > MaxReason {
		return s[:MaxReason]
	}
	return s
}

// appendMessage appends a message (header and body) to b.
func appendMessage(b []byte, t MsgType, room uint64, body []byte) []byte {
	h := Header{Type: t, Room: room, Len: uint32(len(body)), CRC: Checksum(body)}
	var hb [HeaderSize]byte
	h.Put(hb[:])
	b = append(b, hb[:]...)
	return append(b, body...)
}
