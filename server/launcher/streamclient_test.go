package launcher

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"pdsoak/internal/http1"
)

// streamClient is one load stream's HTTP/1.1 client for the throughput benchmarks: one
// keep-alive connection over loopback, each request written whole in one write, each
// answer read to its last byte (head, chunked body, terminator) with the wire code the
// router's legs use. net/http's client did the same with two goroutines per connection
// and a request's worth of allocations, which the benchmark's own process paid out of
// the two CPUs it measures the servers on.
type streamClient struct {
	addr string
	req  []byte
	nc   net.Conn
}

// streamConnLife bounds one connection's life (its deadline is set once, at the dial):
// every load run is bounded in time even if a server stops answering.
const streamConnLife = 2 * time.Minute

// streamClients keeps the idle stream clients of each URL and size between load runs,
// as net/http's pool kept its connections: a run measures requests, not dials.
var streamClients = struct {
	sync.Mutex
	idle map[string][]*streamClient
}{idle: map[string][]*streamClient{}}

func getStreamClient(rawURL string, maxTokens int) (*streamClient, error) {
	key := fmt.Sprintf("%s %d", rawURL, maxTokens)
	streamClients.Lock()
	if l := streamClients.idle[key]; len(l) > 0 {
		c := l[len(l)-1]
		streamClients.idle[key] = l[:len(l)-1]
		streamClients.Unlock()
		return c, nil
	}
	streamClients.Unlock()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	req, err := http1.AppendRequest(nil, &http1.Request{Method: "POST", Host: u.Host, Path: "/v1/completions",
		UserAgent: "pdsoak-bench", ContentType: "application/json", Body: smallBody(maxTokens)})
	if err != nil {
		return nil, err
	}
	return &streamClient{addr: u.Host, req: req}, nil
}

func putStreamClient(rawURL string, maxTokens int, c *streamClient) {
	key := fmt.Sprintf("%s %d", rawURL, maxTokens)
	streamClients.Lock()
	streamClients.idle[key] = append(streamClients.idle[key], c)
	streamClients.Unlock()
}

// do sends the request and reads the whole answer; a non-200 status is an error. The
// connection is dropped after an error, a Connection: close answer or a body that did
// not end cleanly, and the next request dials again.
func (c *streamClient) do() error {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.addr, 10*time.Second)
		if err != nil {
			return err
		}
		_ = nc.SetDeadline(time.Now().Add(streamConnLife))
		c.nc = nc
	}
	if _, err := c.nc.Write(c.req); err != nil {
		c.drop()
		return err
	}
	h, body, err := http1.ReadResponsePooled(c.nc)
	if err != nil {
		c.drop()
		return err
	}
	_, err = io.Copy(io.Discard, body)
	if err != nil || h.Close || !body.Done() {
		c.drop()
	}
	if err != nil {
		return err
	}
	if h.Status != 200 {
		return fmt.Errorf("status %d", h.Status)
	}
	return nil
}

func (c *streamClient) drop() {
	c.nc.Close()
	c.nc = nil
}
