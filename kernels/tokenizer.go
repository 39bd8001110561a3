package kernels

import (
	"unicode/utf8"
)

// Token ids of the byte-level tokenizer: ids 0..255 are the bytes themselves, then BOS and
// EOS. Ids from TokenFirstPad up to the vocabulary size are padding: they are never
// produced by Encode or by sampling, and decode to nothing.
const (
	NumByteTokens = 256
	TokenBOS      = 256
	TokenEOS      = 257
	TokenFirstPad = 258
)

// Tokenizer is the byte-level tokenizer shared by every backend. The zero value is ready
// to use; it is stateless and safe for concurrent use.
type Tokenizer struct{}

// Encode returns the bytes of s as token ids, without BOS.
func (Tokenizer) Encode(s string) []int {
	ids := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int(s[i])
	}
	return ids
}

// EncodeWithBOS returns BOS followed by the bytes of s.
func (Tokenizer) EncodeWithBOS(s string) []int {
	ids := make([]int, 1, len(s)+1)
	ids[0] = TokenBOS
	for i := 0; i < len(s); i++ {
		ids = append(ids, int(s[i]))
	}
	return ids
}

// IsSpecial reports whether id is not a byte (BOS, EOS, padding or out of range).
func (Tokenizer) IsSpecial(id int) bool { return id < 0 || id >= NumByteTokens }

// Decode returns the text of ids: special ids are skipped, the remaining bytes are read
// as UTF-8 and every byte that does not belong to a valid encoding becomes U+FFFD (one
// replacement per byte, as `for range` on a Go string does). A StreamDecoder fed the same
// ids produces the same text.
func (Tokenizer) Decode(ids []int) string {
	b := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < NumByteTokens {
			b = append(b, byte(id))
		}
	}
	return validUTF8(b)
}

// validUTF8 replaces each byte outside a valid UTF-8 encoding with U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r) // RuneError for an invalid byte, size 1
		b = b[size:]
	}
	return string(out)
}

// NewStreamDecoder returns a decoder for one token stream.
func (Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{} }

// StreamDecoder turns a stream of token ids into text pieces that are always complete,
// valid UTF-8. Bytes of a character split across tokens are held back until the
// character is complete; bytes that can never form a valid character become U+FFFD.
// The concatenation of every Push result and the final Flush equals Tokenizer.Decode of
// all the ids.
type StreamDecoder struct {
	pending [utf8.UTFMax]byte
	n       int
}

// Push adds one token and returns the text it completes (often "" or one character).
func (d *StreamDecoder) Push(id int) string {
	if id < 0 || id >= NumByteTokens {
		return ""
	}
	d.pending[d.n] = byte(id)
	d.n++
	var out []byte
	for d.n > 0 && utf8.FullRune(d.pending[:d.n]) {
		r, size := utf8.DecodeRune(d.pending[:d.n])
		out = utf8.AppendRune(out, r)
		d.n = copy(d.pending[:], d.pending[size:d.n])
	}
	return string(out)
}

// Pending reports how many bytes are held back waiting for the rest of a character.
func (d *StreamDecoder) Pending() int { return d.n }

// Flush ends the stream: held-back bytes of an incomplete character are returned as
// U+FFFD, one per byte.
func (d *StreamDecoder) Flush() string {
	s := validUTF8(d.pending[:d.n])
	d.n = 0
	return s
}
