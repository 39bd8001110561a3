package router

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"pdsoak/server/scheduler"
)

// Defaults of the Router options.
const (
	// DefaultHealthInterval is how often every worker's /health is polled.
	DefaultHealthInterval = 1 * time.Second
	// DefaultHealthTimeout bounds one /health or /server_info call.
	DefaultHealthTimeout = 2 * time.Second
	// DefaultFailThreshold is how many failed health checks in a row mark a worker
	// unhealthy (a transport error on a request marks it at once).
	DefaultFailThreshold = 2
	// DefaultConnectTimeout bounds the TCP connect to a worker.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultMaxRetries is how many other pairs a request may try while nothing has been
	// sent to the client.
	DefaultMaxRetries = 2
	// DefaultDeadlineGrace is added to a request's deadline before the router gives up on
	// the legs itself, so that workers report their own timeout first.
	DefaultDeadlineGrace = 2 * time.Second
	// DefaultPrefillGrace is how long a finished request waits for its prefill leg's own
	// end before the leg is cancelled.
	DefaultPrefillGrace = 250 * time.Millisecond
	// DefaultFinalSendTimeout bounds the wait for the consumer to take the final event.
	DefaultFinalSendTimeout = 30 * time.Second
)

// Worker is one prefill or decode worker.
type Worker struct {
	// URL is the worker's HTTP base URL (http://host:port).
	URL string
	// BootstrapAddr (prefill only) is the KV bootstrap address decode dials. Empty: read
	// from the worker's GET /server_info field "bootstrap_addr" at every health check, so
	// a restart never leaves a stale address.
	BootstrapAddr string
}

// Option configures a Router.
type Option func(*Router)

// WithHealthInterval sets the /health polling interval.
func WithHealthInterval(d time.Duration) Option { return func(r *Router) { r.healthInterval = d } }

// WithHealthTimeout bounds each health and server_info call.
func WithHealthTimeout(d time.Duration) Option { return func(r *Router) { r.healthTimeout = d } }

// WithFailThreshold sets how many failed checks in a row make a worker unhealthy.
func WithFailThreshold(n int) Option { return func(r *Router) { r.failThreshold = n } }

// WithMaxRetries sets how many other pairs a request may try before any output.
func WithMaxRetries(n int) Option { return func(r *Router) { r.maxRetries = n } }

// WithPrefillGrace sets how long a finished request waits for its prefill leg's own end
// before cancelling it (default DefaultPrefillGrace).
func WithPrefillGrace(d time.Duration) Option { return func(r *Router) { r.prefillGrace = d } }

// WithSeed seeds the generator of bootstrap rooms and tie breaks (NewRNG).
func WithSeed(seed uint64) Option {
	return func(r *Router) { r.rng = NewRNG(seed) }
}

// NewRNG is the router's generator of bootstrap rooms and tie breaks for seed (the
// simulated router draws from the same one).
func NewRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// WithClient replaces the HTTP client used for the legs and health checks.
func WithClient(c *http.Client) Option { return func(r *Router) { r.client = c } }

// WithLogger sets the structured logger.
func WithLogger(l *slog.Logger) Option { return func(r *Router) { r.log = l } }

// WithDeadlineGrace sets how long past a request's deadline the router waits for the legs.
func WithDeadlineGrace(d time.Duration) Option { return func(r *Router) { r.deadlineGrace = d } }

// WithAbortOnUnhealthy (default true) fails the in-flight requests of a worker as soon as
// it is marked unhealthy (it stopped answering /health, or refused a connection), so a
// frozen or partitioned worker turns into explicit errors (retried on another pair when
// nothing was sent yet) rather than requests that hang until their deadline.
func WithAbortOnUnhealthy(on bool) Option { return func(r *Router) { r.abortOnUnhealthy = on } }

// WithRoomSalt fixes the value mixed into bootstrap rooms (default: the time New ran, so
// a restarted router never reuses the rooms of its previous run, which workers may still
// remember as failed). Pairing tie-breaks depend on the seed only.
func WithRoomSalt(salt uint64) Option { return func(r *Router) { r.roomSalt = salt } }

// WithKVLink makes decode worker decodeURL reach prefill worker prefillURL's bootstrap
// server at addr instead (a fault proxy on that KV link).
func WithKVLink(prefillURL, decodeURL, addr string) Option {
	return func(r *Router) { r.kvLinks[[2]string{prefillURL, decodeURL}] = addr }
}

// WithSGLangBugs switches on the router's reproductions of upstream SGLang router bugs
// (scheduler.BugPrefillFailNoDecodeAbort, scheduler.BugDecodeOnlyWhenPrefillDown); the
// CLI allows them only with --semantics sglang.
func WithSGLangBugs(b scheduler.BugSet) Option {
	return func(r *Router) { r.bugs = append(scheduler.BugSet(nil), b...) }
}
