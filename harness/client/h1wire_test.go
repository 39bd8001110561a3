package client

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHead(t *testing.T) {
	tests := []struct {
		name    string
		head    string
		want    respHead
		wantErr string
	}{
		{name: "chunked stream", head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
			want: respHead{status: 200, chunked: true, length: -1, contentType: "text/event-stream"}},
		{name: "length, keep-alive", head: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", want: respHead{status: 200, length: 12}},
		{name: "no reason phrase", head: "HTTP/1.1 204\r\n\r\n", want: respHead{status: 204, length: -1}},
		{name: "connection close", head: "HTTP/1.1 503 Busy\r\nConnection: keep-alive, Close\r\nRetry-After: 2\r\n\r\n",
			want: respHead{status: 503, close: true, length: -1, retryAfter: "2"}},
		{name: "HTTP/1.0 closes", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", want: respHead{status: 200, close: true, length: 1}},
		{name: "HTTP/1.0 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", want: respHead{status: 200, length: 1}},
		{name: "bare LF lines, case", head: "HTTP/1.1 200 OK\ncontent-type:  a/b \n\n", want: respHead{status: 200, length: -1, contentType: "a/b"}},
		{name: "first Content-Type wins", head: "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\n", want: respHead{status: 200, length: -1, contentType: "a/b"}},
		{name: "folded line ignored", head: "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n", want: respHead{status: 200, length: -1}},
		{name: "not HTTP", head: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "bad code", head: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: "malformed HTTP status code"},
		{name: "code glued to reason", head: "HTTP/1.1 200OK\r\n\r\n", wantErr: "malformed HTTP status line"},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantErr: "bad Content-Length"},
		{name: "conflicting lengths", head: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", wantErr: "bad Content-Length"},
		{name: "gzip transfer coding", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", wantErr: "unsupported transfer encoding"},
		{name: "line without colon", head: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", wantErr: "malformed header line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := parseHead([]byte(tt.head))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "client: ")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, h)
		})
	}
}

// wire runs readResponse and reads the whole body over a real loopback connection; the
// server writes raw, in pieces of at most split bytes.
func wire(t *testing.T, raw string, split int) (respHead, []byte, *h1Body, error) {
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
	h, body, err := readResponse(nc)
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
		{name: "length, short", raw: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", body: "hello", wantErr: io.ErrUnexpectedEOF},
		{name: "to the connection's end", raw: "HTTP/1.1 200 OK\r\n\r\nall of it", body: "all of it", clean: true},
		{name: "chunked, cut mid-chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata", body: "data", wantErr: io.ErrUnexpectedEOF},
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
				if body != nil && tt.wantErr == nil {
					assert.Equal(t, tt.clean, body.done(), "split %d: clean end", split)
				}
			})
		}
	}
	t.Run("head too large", func(t *testing.T) {
		_, _, _, err := wire(t, "HTTP/1.1 200 OK\r\nX: "+string(bytes.Repeat([]byte("a"), maxHead))+"\r\n\r\n", 1<<20)
		require.ErrorIs(t, err, errHeadTooLarge)
	})
	t.Run("closed before a head", func(t *testing.T) {
		_, _, _, err := wire(t, "", 1)
		require.True(t, errors.Is(err, io.EOF), "err %v", err)
	})
}

// dechunkAll decodes enc through h1Body, in reads of at most step bytes; after enc the
// connection reports its end.
func dechunkAll(enc []byte, step int) ([]byte, *h1Body, error) {
	buf := append([]byte(nil), enc...)
	c1, c2 := net.Pipe()
	c2.Close()
	defer c1.Close()
	b := &h1Body{nc: c1, lb: &buf, lo: 0, hi: len(buf), chunked: true, remain: -1}
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
		require.True(t, b.done(), "clean end with nothing after it")

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
		assert.True(t, alive(c))
	})
	t.Run("closed by the server", func(t *testing.T) {
		c, s := loopbackPair(t)
		s.Close()
		require.Eventually(t, func() bool { return !alive(c) }, 10*time.Second, 10*time.Millisecond)
	})
	t.Run("unexpected bytes", func(t *testing.T) {
		c, s := loopbackPair(t)
		_, err := s.Write([]byte("HTTP/1.1 200 OK\r\n"))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return !alive(c) }, 10*time.Second, 10*time.Millisecond)
	})
}

// Connections idle past the idle timeout are closed when another goes back to the pool.
func TestIdleConnectionsExpire(t *testing.T) {
	tr := &h1{maxIdle: 10, idleTimeout: time.Hour}
	oldC, oldS := loopbackPair(t)
	newC, _ := loopbackPair(t)
	tr.put(oldC)
	tr.idle[0].since = time.Now().Add(-2 * time.Hour)
	tr.put(newC)
	require.Len(t, tr.idle, 1)
	assert.Same(t, newC, tr.idle[0].nc)
	oldS.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := oldS.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the expired connection was closed")
}
