package kvtransfer

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    Header
	}{
		{"page", Header{Type: MsgPage, Room: 1<<63 - 1, Layer: 31, Page: 7, Len: 4096, CRC: 0xdeadbeef}},
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
		{"layer on control", valid(func(b []byte) { b[15] = 1 })},
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
	h := Header{Type: MsgPage, Room: 9, Layer: 1, Page: 2, Len: uint32(len(page)), CRC: Checksum(page)}
	var hb [HeaderSize]byte
	h.Put(hb[:])
	return [][]byte{
		appendMessage(nil, MsgHello, 0, AppendShape(nil, Shape{16, 4, 256})),
		appendMessage(nil, MsgRegister, 7, AppendRegister(nil, Register{NumTokens: 20, Pages: []int32{1, 2}})),
		appendMessage(nil, MsgDone, 7, AppendDone(nil, Done{FirstToken: 3, NumTokens: 20, Frames: 8})),
		appendMessage(nil, MsgFail, 7, []byte("checksum")),
		appendMessage(nil, MsgHeartbeat, 0, nil),
		append(hb[:], page...),
		{},
		[]byte("KV\x01\x05garbage"),
	}
}

// FuzzFrameDecoder feeds arbitrary bytes to the message reader: it must never panic, and
// whatever it accepts must re-encode to the same bytes.
func FuzzFrameDecoder(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
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
			if h.Type != MsgPage && Checksum(body) != h.CRC {
				t.Fatal("accepted a control message with a bad checksum")
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

func TestReadMessagePageBound(t *testing.T) {
	var hb [HeaderSize]byte
	(&Header{Type: MsgPage, Room: 1, Len: 4096}).Put(hb[:])
	msg := append(hb[:], make([]byte, 4096)...)
	_, _, _, err := readMessage(bytes.NewReader(msg), nil, 1024)
	require.ErrorIs(t, err, ErrProtocol, "oversized page")
	_, _, _, err = readMessage(bytes.NewReader(msg), nil, 4096)
	require.NoError(t, err, "page at the bound")
}
