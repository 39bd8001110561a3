package api

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"pdsoak/kernels"
	"pdsoak/server/failpoint"
	"pdsoak/server/gen"
)

// Defaults of the Handler options.
const (
	DefaultModelName = kernels.DefaultModel
	// DefaultMaxBodyBytes bounds a request body (413 above it).
	DefaultMaxBodyBytes = 4 << 20
	// DefaultCompletionMaxTokens is max_tokens of /v1/completions when the client sends
	// none (OpenAI's default for that endpoint).
	DefaultCompletionMaxTokens = 16
	// DefaultChatMaxTokens is max_tokens of /v1/chat/completions when the client sends
	// none; it is cut to what the context length leaves after the prompt.
	DefaultChatMaxTokens = 256
	// AbsurdMaxTokens rejects max_tokens above it when no context length is configured.
	AbsurdMaxTokens = 1 << 20
	// DefaultWriteStall bounds one write to a client: a client that stops reading a
	// stream for this long is treated as gone (its generation is cancelled).
	DefaultWriteStall = 60 * time.Second
	// DefaultAbortGrace is how long the handler waits for the generator's final event
	// after cancelling a request before it gives up on it.
	DefaultAbortGrace = 5 * time.Second
	// MaxStopStrings and MaxStopLen bound the stop parameter.
	MaxStopStrings = 16
	MaxStopLen     = 256
	maxRequestID   = 128
)

// Tokenizer is what the handler needs from a tokenizer; kernels.Tokenizer implements it.
type Tokenizer interface {
	// EncodeWithBOS returns BOS followed by the ids of s.
	EncodeWithBOS(s string) []int
	// NewStreamDecoder returns a decoder that turns ids into complete UTF-8 pieces.
	NewStreamDecoder() *kernels.StreamDecoder
}

// Option configures a Handler.
type Option func(*Handler)

// WithModelName sets the model id served on /v1/models and required in requests.
func WithModelName(name string) Option { return func(h *Handler) { h.model = name } }

// WithTokenizer replaces the default byte-level tokenizer.
func WithTokenizer(t Tokenizer) Option { return func(h *Handler) { h.tok = t } }

// WithContextLength enables early validation: prompt + max_tokens must fit in n tokens.
func WithContextLength(n int) Option { return func(h *Handler) { h.contextLen = n } }

// WithVocabSize makes /generate reject token ids outside [0, n).
func WithVocabSize(n int) Option { return func(h *Handler) { h.vocab = n } }

// WithInspector serves /health and /debug/requests from in (nil: always healthy, no list).
func WithInspector(in gen.Inspector) Option { return func(h *Handler) { h.insp = in } }

// WithGatherer serves /metrics from g.
func WithGatherer(g prometheus.Gatherer) Option { return func(h *Handler) { h.gatherer = g } }

// WithLogger sets the structured logger (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(h *Handler) { h.log = l } }

// WithMaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
func WithMaxBodyBytes(n int64) Option { return func(h *Handler) { h.maxBody = n } }

// WithRole names the process role ("colocated", "prefill", "decode", "router") shown on
// /debug/requests and /server_info.
func WithRole(role string) Option { return func(h *Handler) { h.role = role } }

// WithServerInfo adds fields to /server_info (semantics, bootstrap_addr, page size, ...).
func WithServerInfo(info map[string]any) Option {
	return func(h *Handler) {
		for k, v := range info {
			h.info[k] = v
		}
	}
}

// WithRequestTimeout bounds every generation: gen.Request.Deadline is set to arrival + d
// unless the caller (a /generate body) carries its own. 0 leaves it to the generator.
func WithRequestTimeout(d time.Duration) Option { return func(h *Handler) { h.reqTimeout = d } }

// WithAbortGrace sets how long to wait for the final event after cancelling a generation.
func WithAbortGrace(d time.Duration) Option { return func(h *Handler) { h.abortGrace = d } }

// WithWriteStall bounds each write to a client (default DefaultWriteStall; 0: none).
func WithWriteStall(d time.Duration) Option { return func(h *Handler) { h.writeStall = d } }

// WithSeedSource sets where the sampling seed of requests that send none comes from
// (default: crypto/rand).
func WithSeedSource(f func() uint64) Option { return func(h *Handler) { h.seed = f } }

// WithAdminHandler mounts a under /admin/, reachable from loopback addresses only (the
// failpoint admin API). Without it /admin/ does not exist.
func WithAdminHandler(a http.Handler) Option { return func(h *Handler) { h.admin = a } }

// Defaults of WithRefusalLogRate: a burst of 20 overload refusals logged, then one a second.
const (
	DefaultRefusalLogEvery = time.Second
	DefaultRefusalLogBurst = 20
)

// WithRefusalLogRate bounds the log lines of overload refusals (503) to burst, refilled
// one per every; the others are counted in the next line written. Other refusals are
// always logged.
func WithRefusalLogRate(every time.Duration, burst int) Option {
	return func(h *Handler) { h.refusalLog = rate.NewLimiter(rate.Every(every), burst) }
}

// Handler is the HTTP front end of a generator: the OpenAI API, the worker /generate
// endpoint and the operational endpoints. It is safe for concurrent use.
type Handler struct {
	gen        gen.Generator
	insp       gen.Inspector
	tok        Tokenizer
	model      string
	role       string
	contextLen int
	vocab      int
	maxBody    int64
	reqTimeout time.Duration
	abortGrace time.Duration
	writeStall time.Duration
	gatherer   prometheus.Gatherer
	log        *slog.Logger
	seed       func() uint64
	admin      http.Handler
	info       map[string]any
	created    int64

	routes map[string]route
	// draining refuses new generations and fails /health; abortCtx is cancelled to abort
	// every in-flight generation (shutdown).
	draining atomic.Bool
	abortCtx context.Context
	abortAll context.CancelFunc
	inFlight atomic.Int64

	// refusalLog bounds the lines of overload refusals; refusalsLeftOut counts those
	// not written since the last one that was.
	refusalLog      *rate.Limiter
	refusalsLeftOut atomic.Int64

	// traces is the trace id of each in-flight request that carried a traceparent.
	traces traceTable
}

type route struct {
	methods []string
	fn      http.HandlerFunc
}

// New returns the handler of g. If g also implements gen.Inspector and WithInspector is
// not given, g is used as the inspector.
func New(g gen.Generator, opts ...Option) *Handler {
	h := &Handler{
		gen: g, tok: kernels.Tokenizer{}, model: DefaultModelName, role: "colocated",
		maxBody: DefaultMaxBodyBytes, abortGrace: DefaultAbortGrace, writeStall: DefaultWriteStall, log: slog.Default(),
		seed: randomSeed, info: map[string]any{}, created: time.Now().Unix(),
		refusalLog: rate.NewLimiter(rate.Every(DefaultRefusalLogEvery), DefaultRefusalLogBurst),
	}
	if in, ok := g.(gen.Inspector); ok {
		h.insp = in
	}
	for _, o := range opts {
		o(h)
	}
	h.log = lazyLogger(h.log)
	h.abortCtx, h.abortAll = context.WithCancel(context.Background())
	get := []string{http.MethodGet, http.MethodHead}
	h.routes = map[string]route{
		"/v1/completions":      {[]string{http.MethodPost}, h.serveCompletions},
		"/v1/chat/completions": {[]string{http.MethodPost}, h.serveChat},
		"/generate":            {[]string{http.MethodPost}, h.serveGenerate},
		"/v1/models":           {get, h.serveModels},
		"/health":              {get, h.serveHealth},
		"/metrics":             {get, h.serveMetrics},
		"/debug/requests":      {get, h.serveDebugRequests},
		"/server_info":         {get, h.serveServerInfo},
	}
	if h.role == "router" {
		// SGLang's router (sgl-model-gateway) answers /health and /liveness whatever its
		// workers' state and /readiness only once it has healthy workers; this router's
		// /health already tells the truth, /readiness is the same answer under the name a
		// pack written for the real router waits on.
		h.routes["/readiness"] = route{get, h.serveHealth}
		h.routes["/liveness"] = route{get, h.serveLiveness}
	}
	return h
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// Drain makes the handler refuse new generations with 503 and report /health 503, while
// in-flight requests continue. Used by Server.Shutdown.
func (h *Handler) Drain() { h.draining.Store(true) }

// Abort cancels every in-flight generation; each client receives an explicit error
// (503 before headers, an SSE error event after). Used when the shutdown grace expires.
func (h *Handler) Abort() { h.Drain(); h.abortAll() }

// InFlight is the number of generations being served.
func (h *Handler) InFlight() int64 { return h.inFlight.Load() }

// ServeHTTP routes a request. Every response carries X-Request-ID.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := requestID(r.Header.Get("X-Request-ID"))
	w.Header().Set("X-Request-ID", rid)
	r = r.WithContext(context.WithValue(r.Context(), ridKey{}, rid))
	r, untrace := h.withTrace(r, rid)
	defer untrace()
	path := r.URL.Path
	switch {
	case path == "/debug/pprof" || strings.HasPrefix(path, "/debug/pprof/"):
		h.servePprof(w, r)
		return
	case h.admin != nil && (path == "/admin" || strings.HasPrefix(path, "/admin/")):
		if !isLoopback(r.RemoteAddr) {
			writeError(w, &apiError{status: http.StatusForbidden, kind: "invalid_request", code: "forbidden",
				msg: "the admin API is reachable from loopback only"})
			return
		}
		h.admin.ServeHTTP(w, r)
		return
	}
	rt, ok := h.routes[path]
	if id, one := strings.CutPrefix(path, "/v1/models/"); one && id != "" {
		// An OpenAI client's models.retrieve; ids may hold slashes (org/name).
		rt, ok = route{[]string{http.MethodGet, http.MethodHead}, func(w http.ResponseWriter, r *http.Request) { h.serveModel(w, r, id) }}, true
	}
	if !ok {
		writeError(w, &apiError{status: http.StatusNotFound, kind: "invalid_request", code: "not_found",
			msg: fmt.Sprintf("no route for %s", path)})
		return
	}
	for _, m := range rt.methods {
		if r.Method == m {
			rt.fn(w, r)
			return
		}
	}
	w.Header().Set("Allow", strings.Join(rt.methods, ", "))
	writeError(w, &apiError{status: http.StatusMethodNotAllowed, kind: "invalid_request", code: "method_not_allowed",
		msg: fmt.Sprintf("%s does not allow %s", path, r.Method)})
}

type ridKey struct{}

func ridOf(r *http.Request) string {
	s, _ := r.Context().Value(ridKey{}).(string)
	return s
}

// requestID returns the client's id when it is usable (1..128 visible ASCII characters)
// and a fresh random one otherwise.
func requestID(s string) string {
	if s != "" && len(s) <= maxRequestID {
		ok := true
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				ok = false
				break
			}
		}
		if ok {
			return s
		}
	}
	return strings.ToLower(rand.Text())
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readBody reads a bounded request body; a body over the limit is a 413.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	if ce := contentCoding(r.Header); ce != "" {
		// Read as it is, a coded body is either garbage or a lie about its bytes.
		w.Header().Set("Accept-Encoding", "identity")
		return nil, &apiError{status: http.StatusUnsupportedMediaType, kind: "invalid_request",
			code: "unsupported_content_encoding", msg: fmt.Sprintf("request body has Content-Encoding %q; only identity is accepted", ce)}
	}
	if lb, ok := r.Body.(*leanBody); ok && int64(len(lb.b)) <= h.maxBody {
		if b, ok := lb.whole(); ok {
			return b, nil // the lean server read it, within the limit
		}
	}
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, kind: "invalid_request",
		code: "request_too_large", msg: fmt.Sprintf("request body is larger than %d bytes", h.maxBody)}
	if r.ContentLength > h.maxBody {
		// From the head alone: no 100 Continue asking for a body to be refused, and no
		// wait (up to the read timeout) for a body the client has not sent. The close
		// keeps net/http from reading the unread body before it answers.
		w.Header().Set("Connection", "close")
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &apiError{status: http.StatusRequestTimeout, kind: "invalid_request", code: "request_timeout",
				msg: "the request body did not arrive whole within the read timeout"}
		}
		return nil, invalid("", fmt.Sprintf("reading request body: %v", err))
	}
	return body, nil
}

// contentCoding is the first content coding of a request body other than identity ("":
// none).
func contentCoding(hdr http.Header) string {
	for _, v := range hdr.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c
			}
		}
	}
	return ""
}

// writeGuard arms a write deadline before each write to the client, so a client that
// stops reading cannot hold a handler forever, and clears it when the request ends (the
// connection may be reused).
type writeGuard struct {
	rc      *http.ResponseController
	stall   time.Duration
	armed   bool
	armedAt time.Time
	kept    bool // the deadline bounds the server's final flush too
}

// rearmEvery is the fraction of the stall bound after which arm moves the deadline
// again: setting it costs a runtime timer update, once per event of every stream, so a
// deadline set less than stall/rearmEvery ago is kept. A stalled write is still cut
// within the bound, at the earliest after (1 - 1/rearmEvery) of it.
const rearmEvery = 16

func (g *writeGuard) arm() {
	if g.stall <= 0 {
		return
	}
	now := time.Now()
	if g.armed && now.Sub(g.armedAt) < g.stall/rearmEvery {
		return
	}
	if g.rc.SetWriteDeadline(now.Add(g.stall)) == nil {
		g.armed, g.armedAt = true, now
	}
}

// keepForFinalFlush arms a fresh deadline and keeps it past the handler, so that the
// response's last bytes may be left to the flush net/http does after the handler returns
// (together with the end of the chunked body: one write instead of two) and that flush is
// bounded too. net/http clears the connection's write deadline after that flush, before
// it reads the next request. False when there is no bound to keep (stall 0).
func (g *writeGuard) keepForFinalFlush() bool {
	if g.stall <= 0 {
		return false
	}
	g.arm()
	g.kept = g.armed
	return g.kept
}

func (g *writeGuard) clear() {
	if g.armed && !g.kept {
		_ = g.rc.SetWriteDeadline(time.Time{})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	_, _ = w.Write(append(b, '\n'))
}

func (h *Handler) modelObject() map[string]any {
	m := map[string]any{"id": h.model, "object": "model", "created": h.created, "owned_by": "pdsoak", "root": h.model}
	if h.contextLen > 0 {
		m["max_model_len"] = h.contextLen
	}
	return m
}

func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{h.modelObject()}})
}

// serveModel is GET /v1/models/{id}: the served model, or a 404 as for a request naming
// another one.
func (h *Handler) serveModel(w http.ResponseWriter, r *http.Request, id string) {
	if id != h.model {
		writeError(w, &apiError{status: http.StatusNotFound, kind: gen.ErrorKind(gen.ErrInvalid), code: "model_not_found", param: "model",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", id, h.model)})
		return
	}
	writeJSON(w, http.StatusOK, h.modelObject())
}

func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	var err error
	switch {
	case h.draining.Load():
		err = errors.New("server is shutting down")
	case h.insp != nil:
		err = h.insp.Healthy()
	}
	if v, ferr := failpoint.Eval(r.Context(), failpoint.APIHealth); ferr == nil && v == "ok" {
		err = nil // a health that lies, on purpose (failpoint api/health)
	}
	if err != nil {
		writeError(w, &apiError{status: HealthStatus(err), kind: gen.ErrorKind(gen.ErrUnavailable),
			code: "unhealthy", msg: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "role": h.role})
}

// serveLiveness answers that the process serves HTTP: 200 while it is not shutting down.
func (h *Handler) serveLiveness(w http.ResponseWriter, r *http.Request) {
	if h.draining.Load() {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, kind: gen.ErrorKind(gen.ErrUnavailable),
			code: "unhealthy", msg: "server is shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "role": h.role})
}

func (h *Handler) serveMetrics(w http.ResponseWriter, r *http.Request) {
	g := h.gatherer
	if g == nil {
		g = prometheus.NewRegistry()
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// DebugRequests is the body of GET /debug/requests.
type DebugRequests struct {
	Role     string            `json:"role"`
	Count    int               `json:"count"`
	Requests []gen.RequestInfo `json:"requests"`
}

func (h *Handler) serveDebugRequests(w http.ResponseWriter, r *http.Request) {
	out := DebugRequests{Role: h.role, Requests: []gen.RequestInfo{}}
	if h.insp != nil {
		if reqs := h.insp.Requests(); reqs != nil {
			out.Requests = reqs
		}
	}
	out.Requests = h.traces.fill(out.Requests)
	OldestFirst(out.Requests)
	out.Count = len(out.Requests)
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) serveServerInfo(w http.ResponseWriter, r *http.Request) {
	out := make(map[string]any, len(h.info)+3)
	for k, v := range h.info {
		out[k] = v
	}
	out["role"] = h.role
	out["model"] = h.model
	if h.contextLen > 0 {
		out["context_length"] = h.contextLen
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		if r.URL.Path == "/debug/pprof" {
			http.Redirect(w, r, "/debug/pprof/", http.StatusMovedPermanently)
			return
		}
		pprof.Index(w, r)
	}
}
