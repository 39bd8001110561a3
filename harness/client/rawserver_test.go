package client

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// rawServer is an in-process server that answers every request with exact bytes:
// answer gets the connection's request count (from 1) and returns the bytes to write and
// what to do after (keep the connection, close it, or reset it).
type rawServer struct {
	ln     net.Listener
	url    string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
	seen   []http.Header // every request's headers, in arrival order
	answer func(n int) (raw string, after rawAfter)
}

type rawAfter int

const (
	keepOpen rawAfter = iota
	closeConn
	resetConn
)

// newRawServer starts one; tlsOn serves https with a test certificate.
func newRawServer(t *testing.T, tlsOn bool, answer func(n int) (string, rawAfter)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &rawServer{ln: ln, answer: answer, url: "http://" + ln.Addr().String()}
	if tlsOn {
		s.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{testCert(t)}})
		s.url = "https://" + ln.Addr().String()
	}
	s.wg.Go(func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// requests is how many requests the server read.
func (s *rawServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		s.mu.Lock()
		s.seen = append(s.seen, req.Header)
		s.mu.Unlock()
		raw, after := s.answer(n)
		if _, err := io.WriteString(c, raw); err != nil {
			return
		}
		switch after {
		case closeConn:
			return
		case resetConn:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			} else if tc, ok := c.(*tls.Conn); ok {
				if nc, ok := tc.NetConn().(*net.TCPConn); ok {
					_ = nc.SetLinger(0)
				}
			}
			return
		}
	}
}

// testCert is httptest's certificate for 127.0.0.1.
func testCert(t *testing.T) tls.Certificate {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return srv.TLS.Certificates[0]
}

// chunked frames body as one chunk per piece, then the terminator.
func chunked(pieces ...string) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(strconv.FormatInt(int64(len(p)), 16) + "\r\n" + p + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}
