package http1

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHead(t *testing.T) {
	tests := []struct {
		name    string
		head    string
		want    Head
		wantErr string
	}{
		{name: "chunked stream", head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
			want: Head{Status: 200, Chunked: true, Length: -1, ContentType: "text/event-stream"}},
		{name: "length, keep-alive", head: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", want: Head{Status: 200, Length: 12}},
		{name: "no reason phrase", head: "HTTP/1.1 204\r\n\r\n", want: Head{Status: 204, Length: -1}},
		{name: "connection close", head: "HTTP/1.1 503 Busy\r\nConnection: keep-alive, Close\r\nRetry-After: 2\r\n\r\n",
			want: Head{Status: 503, Close: true, Length: -1, RetryAfter: "2"}},
		{name: "HTTP/1.0 closes", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", want: Head{Status: 200, Close: true, Length: 1}},
		{name: "HTTP/1.0 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", want: Head{Status: 200, Length: 1}},
		{name: "bare LF lines, case", head: "HTTP/1.1 200 OK\ncontent-type:  a/b \n\n", want: Head{Status: 200, Length: -1, ContentType: "a/b"}},
		{name: "first Content-Type wins", head: "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\n", want: Head{Status: 200, Length: -1, ContentType: "a/b"}},
		{name: "folded line rejected", head: "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n", wantErr: "obsolete line folding"},
		{name: "content coding kept", head: "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", want: Head{Status: 200, Length: -1, ContentEncoding: "gzip"}},
		{name: "length and chunked: chunked wins", head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", want: Head{Status: 200, Length: -1, Chunked: true}},
		{name: "signed length", head: "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", wantErr: "Content-Length"},
		{name: "not HTTP", head: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: "status line"},
		{name: "bad code", head: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: "status code"},
		{name: "code glued to reason", head: "HTTP/1.1 200OK\r\n\r\n", wantErr: "status line"},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "Content-Length"},
		{name: "conflicting lengths", head: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", wantErr: "Content-Length"},
		{name: "gzip transfer coding", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", wantErr: "transfer coding"},
		{name: "line without colon", head: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", wantErr: "header line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHead([]byte(tt.head))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.ErrorIs(t, err, ErrMalformed)
				assert.Contains(t, err.Error(), "http1: ")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, h)
		})
	}
}

// wire runs readResponse and reads the whole body over a real loopback connection; the
// server writes raw, in pieces of at most split bytes.
func wire(t *testing.T, raw string, split int) (Head, []byte, *Body, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for b := []byte(raw); len(b) > 0; {
			n := min(split, len(b))
			if _, err := c.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	h, body, err := ReadResponse(nc)
	if err != nil {
		return h, nil, nil, err
	}
	data, err := io.ReadAll(body)
	return h, data, body, err
}

func TestReadResponse(t *testing.T) {
	sse := "data: a\n\ndata: [DONE]\n\n"
	tests := []struct {
		name    string
		raw     string
		body    string
		clean   bool // the body ended cleanly with nothing after it
		wantErr error
	}{
		{name: "chunked", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: a\n\n\r\nE;ext=1\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
			body: sse, clean: true},
		{name: "chunked with trailer", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-T: 1\r\n\r\n", body: "x", clean: true},
		{name: "chunked, bytes past the end", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\nJUNK", body: "x"},
		{name: "interim 100 then the answer", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "ok", clean: true},
		{name: "length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", body: "hello", clean: true},
		{name: "length, short", raw: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", body: "hello", wantErr: ErrConnectionLost},
		{name: "to the connection's end", raw: "HTTP/1.1 200 OK\r\n\r\nall of it", body: "all of it", clean: true},
		{name: "chunked, cut mid-chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata", body: "data", wantErr: ErrConnectionLost},
		{name: "chunked, bad size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: errBadChunk},
		{name: "chunked, no CRLF after data", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy", body: "x", wantErr: errBadChunk},
		{name: "no content", raw: "HTTP/1.1 204 No Content\r\n\r\n", clean: true},
	}
	for _, tt := range tests {
		for _, split := range []int{1, 3, 1 << 20} {
			t.Run(tt.name, func(t *testing.T) {
				_, data, body, err := wire(t, tt.raw, split)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr, "split %d", split)
				} else {
					require.NoError(t, err, "split %d", split)
				}
				assert.Equal(t, tt.body, string(data), "split %d", split)
				// Bytes past the end are seen only when they arrive with the body's last
				// bytes: written in pieces, they may come after the client stopped reading.
				junk := strings.HasSuffix(tt.raw, "JUNK")
				if body != nil && tt.wantErr == nil && (!junk || split == 1<<20) {
					assert.Equal(t, tt.clean, body.Done(), "split %d: clean end", split)
				}
			})
		}
	}
	t.Run("head too large", func(t *testing.T) {
		_, _, _, err := wire(t, "HTTP/1.1 200 OK\r\nX: "+string(bytes.Repeat([]byte("a"), MaxHead))+"\r\n\r\n", 1<<20)
		require.ErrorIs(t, err, ErrHeadTooLarge)
	})
	t.Run("closed before a head", func(t *testing.T) {
		_, _, _, err := wire(t, "", 1)
		require.ErrorIs(t, err, io.EOF)
		require.ErrorIs(t, err, ErrNoResponse)
	})
}

// dechunkAll decodes enc through h1Body, in reads of at most step bytes; after enc the
// connection reports its end.
func dechunkAll(enc []byte, step int) ([]byte, *Body, error) {
	buf := append([]byte(nil), enc...)
	c1, c2 := net.Pipe()
	c2.Close()
	defer c1.Close()
	b := &Body{nc: c1, lb: &buf, lo: 0, hi: len(buf), chunked: true, remain: -1}
	b.settle()
	out, err := io.ReadAll(io.LimitReader(&stepReader{b, step}, int64(len(enc))+1))
	return out, b, err
}

// stepReader reads at most step bytes at a time.
type stepReader struct {
	r    io.Reader
	step int
}

func (s *stepReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.step)]) }

// FuzzDechunk: any data chunked by net/http's writer decodes back to itself whatever
// the read sizes; arbitrary input never panics and never yields more than it holds.
func FuzzDechunk(f *testing.F) {
	f.Add([]byte("data: x\n\n"), []byte{3, 1, 4}, uint8(7), []byte("5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte{}, []byte{}, uint8(1), []byte("0\r\n\r\n"))
	f.Add(bytes.Repeat([]byte("ab"), 300), []byte{200, 1}, uint8(255), []byte("1;a=b\r\nx\r\n0\r\nT: v\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data, cuts []byte, step uint8, raw []byte) {
		var enc bytes.Buffer
		w := httputil.NewChunkedWriter(&enc)
		rest := data
		for _, c := range cuts {
			n := min(int(c), len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Write(rest)
		w.Close()
		enc.WriteString("\r\n") // the empty trailer
		out, b, err := dechunkAll(enc.Bytes(), int(step)+1)
		require.NoError(t, err)
		require.Equal(t, string(data), string(out))
		require.True(t, b.Done(), "clean end with nothing after it")

		got, _, _ := dechunkAll(raw, int(step)+1)
		require.LessOrEqual(t, len(got), len(raw))
	})
}

// loopbackPair returns both ends of a real TCP connection.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// A pooled connection is reused only while it is open and quiet.
func TestAlive(t *testing.T) {
	t.Run("open and quiet", func(t *testing.T) {
		c, _ := loopbackPair(t)
		assert.True(t, Alive(c))
	})
	t.Run("closed by the server", func(t *testing.T) {
		c, s := loopbackPair(t)
		s.Close()
		require.Eventually(t, func() bool { return !Alive(c) }, 10*time.Second, 10*time.Millisecond)
	})
	t.Run("unexpected bytes", func(t *testing.T) {
		c, s := loopbackPair(t)
		_, err := s.Write([]byte("HTTP/1.1 200 OK\r\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return !Alive(c) }, 10*time.Second, 10*time.Millisecond)
	})
}

// Connections idle past the idle timeout are closed when another goes back to the pool,
// and never handed out again.
func TestIdleConnectionsExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPool(WithIdleTimeout(time.Hour), WithMaxIdle(10), WithClock(func() time.Time { return now }))
	oldC, oldS := loopbackPair(t)
	newC, _ := loopbackPair(t)
	p.Put("a", oldC)
	now = now.Add(2 * time.Hour)
	p.Put("a", newC)
	require.Len(t, p.idle["a"], 1)
	assert.Same(t, newC, p.idle["a"][0].nc)
	oldS.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := oldS.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the expired connection was closed")

	now = now.Add(time.Hour) // newC is now as old as the idle timeout
	assert.Nil(t, p.Get("a"), "a connection idle for the idle timeout is not reused")
}

// Get hands out the most recently used live connection and skips dead ones.
func TestPoolGetSkipsClosed(t *testing.T) {
	p := NewPool()
	liveC, _ := loopbackPair(t)
	deadC, deadS := loopbackPair(t)
	p.Put("a", liveC)
	p.Put("a", deadC)
	deadS.Close()
	require.Eventually(t, func() bool { return !Alive(deadC) }, 10*time.Second, 10*time.Millisecond)
	assert.Same(t, liveC, p.Get("a"))
	assert.Nil(t, p.Get("a"))
}

// IdleRace is true only for a reused connection that ended before any response byte.
func TestIdleRace(t *testing.T) {
	_, err := wireErr(t, "")
	require.ErrorIs(t, err, ErrNoResponse)
	assert.True(t, IdleRace(true, err), "reused, nothing came back")
	assert.False(t, IdleRace(false, err), "a fresh connection's failure is the request's")
	_, err = wireErr(t, "HTTP/1.1 200 OK\r\n")
	require.Error(t, err)
	assert.False(t, IdleRace(true, err), "after a response byte it is the request's")
	assert.ErrorIs(t, err, ErrConnectionLost)
	assert.True(t, IdleRace(true, WriteError(syscall.EPIPE)))
	assert.False(t, IdleRace(true, WriteError(os.ErrDeadlineExceeded)))
}

func wireErr(t *testing.T, raw string) (Head, error) {
	h, _, _, err := wire(t, raw, 1<<20)
	return h, err
}

// TestReadResponsePooled: bodies read from pooled head buffers stay intact while other
// pooled reads come and go (a buffer goes back only once its body's bytes are used).
func TestReadResponsePooled(t *testing.T) {
	resp := func(i int) (string, string) {
		body := strings.Repeat(string(rune('a'+i%26)), 10+i*37%500)
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body), body
	}
	for round := range 50 {
		type open struct {
			b    *Body
			want string
			got  []byte
		}
		var bodies []*open
		for i := range 4 {
			raw, want := resp(round*4 + i)
			_, b, err := ReadResponsePooled(&bytesConn{r: bytes.NewReader([]byte(raw))})
			require.NoError(t, err)
			bodies = append(bodies, &open{b: b, want: want})
		}
		for done := 0; done < len(bodies); { // read them interleaved, a few bytes at a time
			done = 0
			for _, o := range bodies {
				var p [7]byte
				n, err := o.b.Read(p[:])
				o.got = append(o.got, p[:n]...)
				if err == io.EOF {
					done++
				} else {
					require.NoError(t, err)
				}
			}
		}
		for _, o := range bodies {
			require.Equal(t, o.want, string(o.got))
		}
	}
}
