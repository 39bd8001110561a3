package http1

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const routerHead = "POST /generate HTTP/1.1\r\nHost: 127.0.0.1:30001\r\nUser-Agent: pdsoak-router\r\n" +
	"Content-Type: application/json\r\nContent-Length: 42\r\nAccept: text/event-stream\r\n" +
	"Accept-Encoding: identity\r\nX-Request-Id: r-1\r\n\r\n"

func TestParseRequestHead(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		ok         bool
		close      bool
	}{
		{"the router's", routerHead, true, false},
		{"close", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", true, true},
		{"keep-alive token", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n", true, false},
		{"no host", "POST /generate HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false, false},
		{"two hosts", "POST /generate HTTP/1.1\r\nHost: a\r\nHost: a\r\nContent-Length: 0\r\n\r\n", false, false},
		{"no length", "POST /generate HTTP/1.1\r\nHost: h\r\n\r\n", false, false},
		{"two lengths", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", false, false},
		{"signed length", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n", false, false},
		{"chunked", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false, false},
		{"expect", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n", false, false},
		{"HTTP/1.0", "POST /generate HTTP/1.0\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false, false},
		{"query", "POST /generate?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false, false},
		{"escape", "POST /gen%65rate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false, false},
		{"absolute form", "POST http://h/generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false, false},
		{"bare LF", "POST /generate HTTP/1.1\nHost: h\nContent-Length: 0\n\n", false, false},
		{"obs-fold", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nX-A: 1\r\n 2\r\n\r\n", false, false},
		{"space before colon", "POST /generate HTTP/1.1\r\nHost : h\r\nContent-Length: 0\r\n\r\n", false, false},
		{"control in value", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nX-A: a\x01b\r\n\r\n", false, false},
		{"unicode fold", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: clo\u017fe\r\n\r\n", false, false},
		{"unfinished", "POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			h, ok := ParseRequestHead(tc.head, func(n, _ string) { names = append(names, n) })
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.close, h.Close)
				require.Equal(t, h.Fields, len(names))
				agreeWithNetHTTP(t, tc.head, h)
			}
		})
	}
}

// agreeWithNetHTTP checks that net/http reads head as h says: method, path, length,
// close, host and every field value.
func agreeWithNetHTTP(t *testing.T, head string, h RequestHead) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		t.Fatalf("accepted a head net/http rejects (%v):\n%q", err, head)
	}
	if r.Method != h.Method || r.URL.Path != h.Target || r.URL.RawQuery != "" || r.ContentLength != h.ContentLength ||
		r.Close != h.Close || r.Host != h.Host {
		t.Fatalf("net/http reads %s %s length %d close %v host %q; ours %+v\n%q", r.Method, r.URL.Path, r.ContentLength, r.Close, r.Host, h, head)
	}
	got := http.Header{}
	ParseRequestHead(head, func(n, v string) {
		if !strings.EqualFold(n, "Host") {
			got.Add(n, v)
		}
	})
	for k, vs := range r.Header {
		require.Equal(t, vs, got[k], "header %s of %q", k, head)
	}
	require.Equal(t, len(r.Header), len(got), "header count of %q", head)
	for _, vs := range r.Header {
		for _, v := range vs {
			require.True(t, ValidHeaderValue(v)) // a net/http server refuses the others
		}
	}
}

// FuzzParseRequestHead: every head ParseRequestHead accepts is read by net/http's
// ReadRequest the same way (method, path, Content-Length, close, host, fields). It may
// decline heads net/http reads (those go to net/http).
func FuzzParseRequestHead(f *testing.F) {
	for _, s := range []string{
		routerHead,
		"POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		"GET /health HTTP/1.1\r\nHost: [::1]:80\r\nContent-Length: 00\r\nX-A:  a b \t\r\nx-a: c\r\n\r\n",
		"POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: keep-alive, close\r\n\r\n",
		"POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nX-Obs: caf\xc3\xa9\r\n\r\n",
		"POST /generate HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, head string) {
		h, ok := ParseRequestHead(head, nil)
		if ok {
			agreeWithNetHTTP(t, head, h)
		}
	})
}
