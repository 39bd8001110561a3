package kvtransfer

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Header
	}{
		{"pages", Header{Type: MsgPages, Room: 1<<63 - 1, Len: 4096, CRC: 0xdeadbeef}},
		{"heartbeat", Header{Type: MsgHeartbeat}},
		{"fail room", Header{Type: MsgFail, Room: 3, Len: 10, CRC: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b [HeaderSize]byte
			tc.h.Put(b[:])
			got, err := ParseHeader(b[:])
			require.NoError(t, err)
			require.Equal(t, tc.h, got)
		})
	}
}

func TestParseHeaderRejects(t *testing.T) {
	valid := func(f func(b []byte)) []byte {
		var b [HeaderSize]byte
		(&Header{Type: MsgRegister, Room: 5, Len: 12}).Put(b[:])
		f(b[:])
		return b[:]
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"short", make([]byte, 10)},
		{"bad magic", valid(func(b []byte) { b[0] = 'X' })},
		{"bad version", valid(func(b []byte) { b[2] = 9 })},
		{"type zero", valid(func(b []byte) { b[3] = 0 })},
		{"unknown type", valid(func(b []byte) { b[3] = 200 })},
		{"control body too big", valid(func(b []byte) { b[20] = 0x10 })},
		{"reserved byte set", valid(func(b []byte) { b[15] = 1 })},
		{"empty pages table", valid(func(b []byte) { b[3] = byte(MsgPages); b[23] = 0 })},
		{"pages table not whole entries", valid(func(b []byte) { b[3] = byte(MsgPages); b[23] = 17 })},
		{"pages table too long", valid(func(b []byte) { b[3] = byte(MsgPages); b[21] = 0x40; b[23] = 16 })},
		{"register without room", valid(func(b []byte) { copy(b[4:12], make([]byte, 8)) })},
		{"heartbeat with room", valid(func(b []byte) { b[3] = byte(MsgHeartbeat); b[20], b[21], b[22], b[23] = 0, 0, 0, 0 })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.b)
			require.ErrorIs(t, err, ErrProtocol)
		})
	}
}

func TestReadMessageControlChecksum(t *testing.T) {
	msg := appendMessage(nil, MsgDone, 4, AppendDone(nil, Done{1, 2, 3}))
	msg[len(msg)-1] ^= 1
	_, _, _, err := ReadMessage(bytes.NewReader(msg), nil)
	require.ErrorIs(t, err, ErrProtocol, "corrupted control body")
}

func frameSeeds() [][]byte {
	page := []byte("0123456789abcdef")
	table := AppendEntry(AppendEntry(nil, Entry{Page: 2, Layer: 1, Len: 16, CRC: Checksum(page)}),
		Entry{Page: 3, Layer: 0, Len: 4, CRC: Checksum(page[:4])})
	pages := append(appendMessage(nil, MsgPages, 9, table), page...)
	pages = append(pages, page[:4]...)
	return [][]byte{
		appendMessage(nil, MsgHello, 0, AppendShape(nil, Shape{16, 4, 256})),
		appendMessage(nil, MsgRegister, 7, AppendRegister(nil, Register{NumTokens: 20, Pages: []int32{1, 2}})),
		appendMessage(nil, MsgDone, 7, AppendDone(nil, Done{FirstToken: 3, NumTokens: 20, Frames: 8})),
		appendMessage(nil, MsgFail, 7, []byte("checksum")),
		appendMessage(nil, MsgHeartbeat, 0, nil),
		pages,
		{},
		[]byte("KV\x01\x05garbage"),
	}
}

// FuzzFrameDecoder feeds arbitrary bytes to the message reader, as the receiver reads a
// connection (a PAGES table, then its payloads): it must never panic, whatever it accepts
// must re-encode to the same bytes, no message with a bad checksum is accepted, and no
// page frame is longer than the bound.
func FuzzFrameDecoder(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	const maxPage = 64
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		var es []Entry
		for i := 0; i < 8; i++ {
			h, body, nbuf, err := ReadMessage(r, buf)
			buf = nbuf
			if err != nil {
				return
			}
			if int(h.Len) != len(body) {
				t.Fatalf("header says %d bytes, body has %d", h.Len, len(body))
			}
			var hb [HeaderSize]byte
			h.Put(hb[:])
			h2, err := ParseHeader(hb[:])
			if err != nil || h2 != h {
				t.Fatalf("re-encoded header %+v: %v", h2, err)
			}
			if Checksum(body) != h.CRC {
				t.Fatal("accepted a message with a bad checksum")
			}
			if h.Type != MsgPages {
				continue
			}
			es, err = ParseEntries(body, es, maxPage)
			if err != nil {
				return
			}
			var table []byte
			for _, e := range es {
				if e.Len > maxPage {
					t.Fatalf("accepted a frame of %d bytes", e.Len)
				}
				table = AppendEntry(table, e)
				if _, err := io.ReadFull(r, make([]byte, e.Len)); err != nil {
					return
				}
			}
			if !bytes.Equal(table, body) {
				t.Fatal("table does not round trip")
			}
		}
	})
}

// FuzzHandshakeDecoder checks the HELLO, REGISTER, DONE and FAIL body decoders.
func FuzzHandshakeDecoder(f *testing.F) {
	f.Add(byte(MsgHello), AppendShape(nil, Shape{16, 4, 256}))
	f.Add(byte(MsgRegister), AppendRegister(nil, Register{NumTokens: 20, Pages: []int32{1, 2}}))
	f.Add(byte(MsgRegister), []byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Add(byte(MsgDone), AppendDone(nil, Done{3, 20, 8}))
	f.Add(byte(MsgFail), []byte("reason"))
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		switch MsgType(typ % byte(msgTypeMax)) {
		case MsgHello, MsgHelloAck:
			s, err := ParseShape(body)
			if err == nil && !bytes.Equal(AppendShape(nil, s), body) {
				t.Fatal("shape does not round trip")
			}
		case MsgRegister:
			r, err := ParseRegister(body)
			if err != nil {
				return
			}
			if !bytes.Equal(AppendRegister(nil, r), body) {
				t.Fatal("register does not round trip")
			}
			for _, p := range r.Pages {
				if p < 0 {
					t.Fatal("negative page accepted")
				}
			}
		case MsgDone:
			d, err := ParseDone(body)
			if err == nil && !reflect.DeepEqual(AppendDone(nil, d), body) {
				t.Fatal("done does not round trip")
			}
		case MsgFail:
			if s, err := ParseFail(body); err == nil && s != string(body) {
				t.Fatal("fail reason changed")
			}
		}
	})
}

func TestParseEntries(t *testing.T) {
	e1, e2 := Entry{Page: 1, Layer: 2, Len: 64, CRC: 7}, Entry{Page: 0, Layer: 0, Len: 1, CRC: 0xffffffff}
	tests := []struct {
		name  string
		table []byte
		want  []Entry
		err   bool
	}{
		{"two frames", AppendEntry(AppendEntry(nil, e1), e2), []Entry{e1, e2}, false},
		{"frame at the bound", AppendEntry(nil, Entry{Len: 64}), []Entry{{Len: 64}}, false},
		{"frame over the bound", AppendEntry(nil, Entry{Len: 65}), nil, true},
		{"empty", nil, nil, true},
		{"partial entry", AppendEntry(nil, e1)[:15], nil, true},
		{"too many entries", make([]byte, (MaxEntries+1)*EntrySize), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEntries(tc.table, nil, 64)
			if tc.err {
				require.ErrorIs(t, err, ErrProtocol)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
