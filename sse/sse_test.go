package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseAll(t testing.TB, r io.Reader) ([]Event, error) {
	t.Helper()
	p := NewReader(r)
	var out []Event
	for i := 0; i < 100000; i++ {
		ev, err := p.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	t.Fatal("parser did not terminate")
	return nil, nil
}

// parseAllView is parseAll through NextView, each event's strings copied before the
// next call (as its contract asks).
func parseAllView(t testing.TB, r io.Reader) ([]Event, error) {
	t.Helper()
	p := NewReader(r, WithBufferSize(16)) // a small buffer: compaction and growth under the views
	var out []Event
	for i := 0; i < 100000; i++ {
		ev, err := p.NextView()
		if err != nil {
			return out, err
		}
		ev.Data, ev.Text = strings.Clone(ev.Data), strings.Clone(ev.Text)
		out = append(out, ev)
	}
	t.Fatal("parser did not terminate")
	return nil, nil
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Event
		wantErr error
	}{
		{name: "openai chunks", in: "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			want: []Event{{Data: `{"a":1}`, Retry: -1}, {Data: "[DONE]", Retry: -1}}, wantErr: io.EOF},
		{name: "comment is its own item", in: ": ping\n\ndata: x\n\n",
			want: []Event{{Comment: true, Text: "ping", Retry: -1}, {Data: "x", Retry: -1}}, wantErr: io.EOF},
		{name: "bare colon comment", in: ":\n",
			want: []Event{{Comment: true, Retry: -1}}, wantErr: io.EOF},
		{name: "crlf", in: "data: a\r\n\r\ndata: b\r\n\r\n",
			want: []Event{{Data: "a", Retry: -1}, {Data: "b", Retry: -1}}, wantErr: io.EOF},
		{name: "lone cr", in: "data: a\r\rdata: b\r\r",
			want: []Event{{Data: "a", Retry: -1}, {Data: "b", Retry: -1}}, wantErr: io.EOF},
		{name: "multi-line data", in: "data: a\ndata: b\ndata\n\n",
			want: []Event{{Data: "a\nb\n", Retry: -1}}, wantErr: io.EOF},
		{name: "event type id retry", in: "event: error\nid: 7\nretry: 100\ndata: {}\n\n",
			want: []Event{{Type: "error", ID: "7", Retry: 100, Data: "{}"}}, wantErr: io.EOF},
		{name: "invalid retry ignored", in: "retry: 1x\ndata: z\n\n",
			want: []Event{{Data: "z", Retry: -1}}, wantErr: io.EOF},
		{name: "no space after colon", in: "data:x\n\n",
			want: []Event{{Data: "x", Retry: -1}}, wantErr: io.EOF},
		{name: "event without data not dispatched", in: "event: foo\n\ndata: y\n\n",
			want: []Event{{Data: "y", Retry: -1}}, wantErr: io.EOF},
		{name: "unknown fields ignored", in: "foo: bar\ndata: y\n\n",
			want: []Event{{Data: "y", Retry: -1}}, wantErr: io.EOF},
		{name: "bom stripped", in: "\xef\xbb\xbfdata: y\n\n",
			want: []Event{{Data: "y", Retry: -1}}, wantErr: io.EOF},
		{name: "unterminated event", in: "data: {\"a\":",
			wantErr: ErrUnexpectedEOF},
		{name: "event missing blank line", in: "data: x\n",
			wantErr: ErrUnexpectedEOF},
		{name: "only one space is stripped", in: "data:  x\n\n",
			want: []Event{{Data: " x", Retry: -1}}, wantErr: io.EOF},
		{name: "the last event id persists", in: "id: 1\ndata: a\n\ndata: b\n\n",
			want: []Event{{Data: "a", ID: "1", Retry: -1}, {Data: "b", ID: "1", Retry: -1}}, wantErr: io.EOF},
		{name: "an id with NUL is ignored", in: "id: a\x00b\ndata: x\n\n",
			want: []Event{{Data: "x", Retry: -1}}, wantErr: io.EOF},
		{name: "BOM only at the start", in: "data: a\n\n\xef\xbb\xbfdata: b\n\n",
			want: []Event{{Data: "a", Retry: -1}}, wantErr: io.EOF},
		{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []Event{{Data: "a\nb\nc", Retry: -1}}, wantErr: io.EOF},
		{name: "empty", in: "", wantErr: io.EOF},
		{name: "blank lines only", in: "\n\n\r\n", wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "bytewise"} {
				var src io.Reader = strings.NewReader(tt.in)
				if mode == "bytewise" {
					src = iotest.OneByteReader(src)
				}
				got, err := parseAll(t, src)
				require.ErrorIs(t, err, tt.wantErr, mode)
				assert.Equal(t, tt.want, got, mode)
			}
		})
	}
}

func TestLineTooLong(t *testing.T) {
	in := "data: " + strings.Repeat("x", 100) + "\n\n"
	p := NewReader(strings.NewReader(in), WithMaxLine(32))
	_, err := p.Next()
	require.ErrorIs(t, err, ErrLineTooLong, "one long line")
	p = NewReader(strings.NewReader(strings.Repeat("data: abcdefgh\n", 10)+"\n"), WithMaxLine(32))
	_, err = p.Next()
	require.ErrorIs(t, err, ErrLineTooLong, "data accumulated over lines")
}

// A lone CR must end the line without waiting for the next byte: the event is
// dispatched even though the writer has not closed the stream.
func TestLoneCRDoesNotBlock(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("data: a\r\r")) }()
	p := NewReader(pr)
	ev, err := p.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", ev.Data)
}

func TestReadErrorPropagates(t *testing.T) {
	boom := errors.New("boom")
	p := NewReader(io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom)))
	ev, err := p.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", ev.Data)
	_, err = p.Next()
	require.ErrorIs(t, err, boom)
}

func equalEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzSSE checks that the parser never panics or loops, that chunking does not
// change the result, and that encoded events parse back to themselves.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		": keep-alive\n\n", "event: error\ndata: {\"error\":{}}\n\n", "data: a\r\rdata: b\r\n\r\n",
		"\xef\xbb\xbfdata:x\n\n", "retry: 10\nid: 1\ndata\n\n", "data: x", "\r\n\r\n:",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, errWhole := parseAll(t, bytes.NewReader(in))
		bytewise, errByte := parseAll(t, iotest.OneByteReader(bytes.NewReader(in)))
		if !equalEvents(whole, bytewise) || !errors.Is(errWhole, errByte) && errWhole.Error() != errByte.Error() {
			t.Fatalf("chunking changed the result:\nwhole %+v %v\nbytes %+v %v", whole, errWhole, bytewise, errByte)
		}
		// NextView gives what Next does.
		viewed, errView := parseAllView(t, iotest.HalfReader(bytes.NewReader(in)))
		if !equalEvents(whole, viewed) || !errors.Is(errWhole, errView) && errWhole.Error() != errView.Error() {
			t.Fatalf("NextView differs from Next:\nNext     %+v %v\nNextView %+v %v", whole, errWhole, viewed, errView)
		}
		// Round trip: an event made from the input's text survives encoding.
		text := strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == 0 {
				return 'x'
			}
			return r
		}, string(in))
		ev := Event{Type: "t", Data: text + "\n" + text, ID: "1", Retry: 5}
		var buf bytes.Buffer
		if err := Encode(&buf, ev); err != nil {
			t.Fatal(err)
		}
		got, err := parseAll(t, &buf)
		if err != io.EOF || len(got) != 1 || got[0] != ev {
			t.Fatalf("round trip of %+v: got %+v, %v", ev, got, err)
		}
	})
}

func TestReadData(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr error
	}{
		{name: "data in order, comments skipped", in: ": hi\n\ndata: a\n\ndata: [DONE]\n\n", want: []string{"a", "[DONE]"}},
		{name: "empty", in: ""},
		{name: "ends inside an event", in: "data: a\n\ndata: b\n", want: []string{"a"}, wantErr: ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadData(strings.NewReader(tt.in))
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
