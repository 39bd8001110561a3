package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// ServerProbeTimeout bounds one probe of a process's HTTP server in a process fault's
// proof. The fault scheduler polls Verify until its verify timeout, so one probe per
// Verify is enough.
const ServerProbeTimeout = time.Second

var (
	// ErrRefused: nothing listens at the server's address (its process is gone).
	ErrRefused = errors.New("chaos: connection refused")
	// ErrNoResponse: the server sent no response: none within the probe's timeout (a
	// stopped process's kernel still accepts connections into the listen backlog), or the
	// connection was reset or closed before one.
	ErrNoResponse = errors.New("chaos: no response")
)

// ServerProber is implemented by an Env whose processes' HTTP servers are not on the
// network (the simulator's): the process faults' proofs ask it instead of sending a
// request to Process.URL.
type ServerProber interface {
	// ProbeServer asks p's HTTP server for a response, for at most timeout and until ctx
	// ends: nil when one came (any status); an error wrapping ErrRefused or ErrNoResponse
	// when the server did not answer; any other error when the probe proved nothing.
	ProbeServer(ctx context.Context, p Process, timeout time.Duration) error
}

// ProbeServer sends one GET of p.URL's "/" on a fresh connection: nil when any response
// came back (a 404 is an answer too: only a running process sends one). Refused
// connections wrap ErrRefused; a timeout, a reset or a connection closed before a
// response wrap ErrNoResponse. Anything else (a URL that is not http, a name that does
// not resolve, ctx ending) is an error wrapping neither: no proof either way.
func ProbeServer(ctx context.Context, p Process, timeout time.Duration) error {
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("chaos: %s: server URL %q is not an http(s) base URL", p.Name, p.URL)
	}
	root := u.Scheme + "://" + u.Host + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root, nil)
	if err != nil {
		return fmt.Errorf("chaos: probe %s: %w", root, err)
	}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil,
		DialContext: (&net.Dialer{Timeout: timeout}).DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: timeout}).Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil
	}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("chaos: probe %s: %w", root, ctx.Err())
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: %s: %w", ErrRefused, u.Host, err)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %s: %w", ErrNoResponse, root, err)
	}
	return fmt.Errorf("chaos: probe %s: %w", root, err)
}

// minServerProbe is the shortest probe a Verify near its deadline still makes: a live
// server on loopback answers GET / in well under it.
const minServerProbe = 200 * time.Millisecond

// probeTimeout is ServerProbeTimeout, cut to end before ctx's deadline (less a margin
// for the verdict to get back), but not below minServerProbe. Without the cut a pause
// shorter than the probe (process_pause for 1s) could never be proved: each probe
// outlived the Verify's deadline and proved nothing.
func probeTimeout(ctx context.Context) time.Duration {
	d := ServerProbeTimeout
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)-minServerProbe/4, minServerProbe))
	}
	return d
}

// envProbeServer probes p's server as env knows it (ServerProber), else over the network.
func envProbeServer(ctx context.Context, env Env, p Process, timeout time.Duration) error {
	if sp, ok := env.(ServerProber); ok {
		return sp.ProbeServer(ctx, p, timeout)
	}
	return ProbeServer(ctx, p, timeout)
}

// answeringBefore probes procs' servers before their signal. A refusal or silence after
// the signal proves it only for a server that answered before: a URL that points at
// nothing (a wrong port in health_url) refuses either way. Those that did not answer get
// their URL cleared, so the proof is /proc's alone, and unprobed says why.
func answeringBefore(ctx context.Context, env Env, procs []Process) (unprobed map[string]string) {
	unprobed = map[string]string{}
	probes, _ := probeServers(ctx, env, procs)
	for i := range procs {
		switch {
		case procs[i].URL == "":
			unprobed[procs[i].Name] = "server not probed (no URL)"
		case probes == nil || !probes[i].answered:
			unprobed[procs[i].Name] = fmt.Sprintf("server not probed (%s gave no answer before the signal)", procs[i].URL)
			procs[i].URL = ""
		}
	}
	return unprobed
}

// serverProbe is what one probe of a member's server found.
type serverProbe struct {
	url      string
	skipped  bool          // no URL: the server was not probed
	answered bool          // a response came back
	err      error         // why not (answered false): wraps ErrRefused or ErrNoResponse
	within   time.Duration // the probe's timeout
}

// says is the probe in evidence words; unprobed is why a skipped one was not probed
// (answeringBefore's reason).
func (s serverProbe) says(unprobed string) string {
	switch {
	case s.skipped:
		return unprobed
	case s.answered:
		return s.url + " still answers"
	case errors.Is(s.err, ErrRefused):
		return s.url + " refuses connections"
	}
	var ne net.Error
	if errors.As(s.err, &ne) && ne.Timeout() {
		return fmt.Sprintf("%s gives no response within %s", s.url, s.within.Round(time.Millisecond))
	}
	if errors.Is(s.err, syscall.ECONNRESET) || errors.Is(s.err, io.EOF) || errors.Is(s.err, io.ErrUnexpectedEOF) {
		return s.url + " closes connections without a response"
	}
	return s.url + " gives no response"
}

// probeServers probes the servers of procs at once, one probe each. An error is a probe
// that proved nothing (neither an answer nor a refusal or silence), or ctx ending.
func probeServers(ctx context.Context, env Env, procs []Process) ([]serverProbe, error) {
	out := make([]serverProbe, len(procs))
	errs := make([]error, len(procs))
	timeout := probeTimeout(ctx)
	var wg sync.WaitGroup
	for i, p := range procs {
		out[i].url, out[i].within = p.URL, timeout
		if p.URL == "" {
			out[i].skipped = true
			continue
		}
		wg.Go(func() {
			err := envProbeServer(ctx, env, p, timeout)
			switch {
			case err == nil:
				out[i].answered = true
			case errors.Is(err, ErrRefused) || errors.Is(err, ErrNoResponse):
				out[i].err = err
			default:
				errs[i] = fmt.Errorf("server of %s: %w", p.Name, err)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}
