package kernels

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenizerRoundTrip(t *testing.T) {
	var tk Tokenizer
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"ascii", "Hello, world!\n"},
		{"two-byte", "café"},
		{"three-byte", "日本語のテキスト"},
		{"four-byte", "emoji 🙂🚀"},
		{"replacement char itself", "a\uFFFDb"},
		{"nul and controls", "\x00\x01\t\x7f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := tk.Encode(tt.in)
			if len(ids) != len(tt.in) {
				t.Fatalf("Encode gave %d ids for %d bytes", len(ids), len(tt.in))
			}
			if got := tk.Decode(ids); got != tt.in {
				t.Fatalf("Decode(Encode(%q)) = %q", tt.in, got)
			}
			withBOS := tk.EncodeWithBOS(tt.in)
			if withBOS[0] != TokenBOS || tk.Decode(withBOS) != tt.in {
				t.Fatalf("EncodeWithBOS round trip failed: %v", withBOS)
			}
			if got := streamAll(ids); got != tt.in {
				t.Fatalf("stream decode of %q = %q", tt.in, got)
			}
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	var tk Tokenizer
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		{"lone continuation", []int{'a', 0x80, 'b'}, "a\uFFFDb"},
		{"truncated 3-byte at end", []int{'a', 0xe2, 0x82}, "a\uFFFD\uFFFD"},
		{"truncated 3-byte mid", []int{0xe2, 0x82, 'x'}, "\uFFFD\uFFFDx"},
		{"overlong", []int{0xc0, 0xaf}, "\uFFFD\uFFFD"},
		{"surrogate", []int{0xed, 0xa0, 0x80}, "\uFFFD\uFFFD\uFFFD"},
		{"specials skipped", []int{TokenBOS, 'h', TokenEOS, 'i', TokenFirstPad, 300, -1}, "hi"},
		{"special inside a character", []int{0xe2, TokenEOS, 0x82, 0xac}, "€"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tk.Decode(tt.ids); got != tt.want {
				t.Errorf("Decode = %q, want %q", got, tt.want)
			}
			if got := streamAll(tt.ids); got != tt.want {
				t.Errorf("stream = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStreamDecoderHoldsPartialCharacters(t *testing.T) {
	var tk Tokenizer
	d := tk.NewStreamDecoder()
	euro := tk.Encode("€") // 3 bytes
	if got := d.Push(euro[0]); got != "" || d.Pending() != 1 {
		t.Fatalf("after 1 byte: %q pending %d", got, d.Pending())
	}
	if got := d.Push(euro[1]); got != "" || d.Pending() != 2 {
		t.Fatalf("after 2 bytes: %q pending %d", got, d.Pending())
	}
	if got := d.Push(euro[2]); got != "€" || d.Pending() != 0 {
		t.Fatalf("after 3 bytes: %q pending %d", got, d.Pending())
	}
	if got := d.Flush(); got != "" {
		t.Fatalf("Flush = %q", got)
	}
}

// streamAll feeds ids one by one to a stream decoder, checking that every piece is valid
// UTF-8, and returns the concatenation.
func streamAll(ids []int) string {
	var tk Tokenizer
	d := tk.NewStreamDecoder()
	var sb strings.Builder
	for _, id := range ids {
		piece := d.Push(id)
		if !utf8.ValidString(piece) {
			panic("invalid piece " + piece)
		}
		sb.WriteString(piece)
	}
	sb.WriteString(d.Flush())
	return sb.String()
}

func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"", "hello", "café 日本 🙂", "\xff\xfe", "a\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var tk Tokenizer
		ids := tk.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= NumByteTokens {
				t.Fatalf("Encode produced id %d", id)
			}
		}
		got := tk.Decode(ids)
		if !utf8.ValidString(got) {
			t.Fatalf("Decode produced invalid UTF-8 %q", got)
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		// Invalid input decodes as Go's range loop reads it: one U+FFFD per bad byte.
		var want strings.Builder
		for _, r := range s {
			want.WriteRune(r)
		}
		if got != want.String() {
			t.Fatalf("Decode(%q) = %q, want %q", s, got, want.String())
		}
	})
}

func FuzzStreamDecoder(f *testing.F) {
	f.Add([]byte("hello"), uint8(0))
	f.Add([]byte("日本語\xe2\x82"), uint8(3))
	f.Add([]byte{0xf0, 0x9f, 0x99, 0x82, 0x80}, uint8(2))
	f.Add([]byte{0xe2, 0x82, 0xac, 0xc3}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, specialEvery uint8) {
		var tk Tokenizer
		ids := make([]int, 0, len(data)+len(data)/2)
		for i, c := range data {
			ids = append(ids, int(c))
			if specialEvery > 0 && i%int(specialEvery) == 0 {
				ids = append(ids, TokenEOS+int(specialEvery)%3) // EOS, first pad or next
			}
		}
		if got, want := streamAll(ids), tk.Decode(ids); got != want {
			t.Fatalf("streamed %q, decoded %q", got, want)
		}
	})
}
