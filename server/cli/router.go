package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/server/api"
	"pdsoak/server/router"
	"pdsoak/server/scheduler"
)

// routerFlags are the flags of `pdserver router`.
type routerFlags struct {
	host           string
	port           int
	prefill        []string
	prefillBoot    []string
	decode         []string
	kvLinks        []string
	healthInterval secondsValue
	healthTimeout  secondsValue
	maxRetries     int
	abortUnhealthy bool
	seed           uint64
	modelName      string
	contextLength  int
	requestTimeout secondsValue
	shutdownGrace  secondsValue
	logLevel       string
	logFormat      string
	semantics      string
	bugs           scheduler.BugSet
	pdFallback     string
	faults         routerFaults // router_faults.go
}

// defaultRouterFlags are the router's flags when no flag changes them.
func defaultRouterFlags() *routerFlags {
	return &routerFlags{host: "127.0.0.1", port: DefaultPort, healthInterval: secondsValue(router.DefaultHealthInterval),
		healthTimeout: secondsValue(router.DefaultHealthTimeout), maxRetries: router.DefaultMaxRetries, seed: 1, abortUnhealthy: true,
		shutdownGrace: secondsValue(30 * time.Second), logLevel: "info", logFormat: "text"}
}

func newRouterCommand() *cobra.Command {
	f := defaultRouterFlags()
	cmd := &cobra.Command{
		Use:   "router",
		Short: "Run the PD router: the OpenAI API in front of prefill and decode workers",
		Long: `router serves the OpenAI API and sends each request to a prefill and a decode worker (least
outstanding requests among healthy ones), with a fresh bootstrap room; the decode worker's tokens
stream back. A prefill worker's KV bootstrap address is read from its /server_info unless
--prefill-bootstrap gives it (one per --prefill, in order). --kv-link P:D=ADDR makes decode worker D
reach prefill worker P's bootstrap server at ADDR (a fault proxy on that KV link; indexes from 0).
The model name and context length are read from the first decode worker's /server_info unless given.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				stop() // a second signal kills the process at once
			}()
			return runRouter(ctx, f, cmd.ErrOrStderr(), nil)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds the router's flags to fs.
func (f *routerFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.host, "host", f.host, "address to listen on")
	fs.IntVar(&f.port, "port", f.port, "HTTP port (0 picks a free one; the bound address is logged)")
	fs.StringArrayVar(&f.prefill, "prefill", nil, "prefill worker URL (repeatable)")
	fs.StringArrayVar(&f.prefillBoot, "prefill-bootstrap", nil, "KV bootstrap host:port of the prefill worker of the same position (repeatable, optional)")
	fs.StringArrayVar(&f.decode, "decode", nil, "decode worker URL (repeatable)")
	fs.StringArrayVar(&f.kvLinks, "kv-link", nil, "P:D=host:port — decode D dials prefill P's bootstrap server there (repeatable)")
	fs.Var(&f.healthInterval, "health-interval", "how often each worker's /health is polled")
	fs.Var(&f.healthTimeout, "health-timeout", "bound of one health check")
	fs.IntVar(&f.maxRetries, "max-retries", f.maxRetries, "other pairs a request may try while nothing has been sent to the client")
	fs.BoolVar(&f.abortUnhealthy, "abort-on-unhealthy", f.abortUnhealthy, "fail a worker's in-flight requests as soon as it is marked unhealthy")
	fs.Uint64Var(&f.seed, "seed", f.seed, "seed of the pairing tie breaks and bootstrap rooms (rooms also mix in the start time)")
	fs.StringVar(&f.modelName, "model-name", "", "model id served on /v1/models (default: the decode worker's)")
	fs.IntVar(&f.contextLength, "context-length", 0, "prompt + max_tokens above it is refused with 400 (default: the decode worker's)")
	fs.Var(&f.requestTimeout, "request-timeout", "whole-request bound set on requests that carry none (0: none)")
	fs.Var(&f.shutdownGrace, "shutdown-grace", "on SIGINT/SIGTERM, how long in-flight requests may finish before they are aborted")
	fs.StringVar(&f.logLevel, "log-level", f.logLevel, "debug|info|warn|error")
	fs.StringVar(&f.logFormat, "log-format", f.logFormat, "text|json")
	fs.StringVar(&f.semantics, "semantics", string(scheduler.SemanticsStrict), "strict or sglang; sglang only allows --sglang-bug")
	fs.Var(&f.bugs, "sglang-bug", "reproduce an upstream SGLang router bug (repeatable; needs --semantics sglang): "+
		string(scheduler.BugPrefillFailNoDecodeAbort)+", "+string(scheduler.BugDecodeOnlyWhenPrefillDown))
	f.faults.register(fs)
	fs.StringVar(&f.pdFallback, "pd-fallback", string(router.FallbackNone), "when no prefill can take a request: none (refuse it, 503) or decode-only (decode serves it alone, computing the prompt; disaggregation silently off, as some PD proxies do)")
}

// workers turns the flags into router workers and options; every problem at once.
func (f *routerFlags) workers() ([]router.Worker, []router.Worker, []router.Option, error) {
	var errs []error
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s %s", flag, fmt.Sprintf(format, args...)))
	}
	if f.port < 0 || f.port > 65535 {
		bad("port", "must be in [0, 65535] (got %d)", f.port)
	}
	if len(f.prefill) == 0 {
		bad("prefill", "is required: a prefill worker URL (repeatable)")
	}
	if len(f.decode) == 0 {
		bad("decode", "is required: a decode worker URL (repeatable)")
	}
	if len(f.prefillBoot) != 0 && len(f.prefillBoot) != len(f.prefill) {
		bad("prefill-bootstrap", "is given %s for %s; give it once per --prefill or not at all",
			plural(len(f.prefillBoot), "time"), plural(len(f.prefill), "prefill worker"))
	}
	if f.healthInterval <= 0 {
		bad("health-interval", "must be > 0 (got %s)", time.Duration(f.healthInterval))
	}
	if f.healthTimeout <= 0 {
		bad("health-timeout", "must be > 0 (got %s)", time.Duration(f.healthTimeout))
	}
	if f.maxRetries < 0 {
		bad("max-retries", "must be >= 0 (got %d)", f.maxRetries)
	}
	if f.contextLength < 0 {
		bad("context-length", "must be >= 0 (got %d)", f.contextLength)
	}
	if f.requestTimeout < 0 {
		bad("request-timeout", "must be >= 0 (got %s)", time.Duration(f.requestTimeout))
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		bad("log-level", "%v", err)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		bad("log-format", "%q is unknown (text, json)", f.logFormat)
	}
	var ps, ds []router.Worker
	for i, u := range f.prefill {
		w := router.Worker{URL: u}
		if len(f.prefillBoot) == len(f.prefill) {
			w.BootstrapAddr = f.prefillBoot[i]
			if _, _, err := net.SplitHostPort(w.BootstrapAddr); err != nil {
				bad("prefill-bootstrap", "%q is not host:port", w.BootstrapAddr)
			}
		}
		ps = append(ps, w)
	}
	for _, u := range f.decode {
		ds = append(ds, router.Worker{URL: u})
	}
	opts := []router.Option{router.WithHealthInterval(time.Duration(f.healthInterval)),
		router.WithHealthTimeout(time.Duration(f.healthTimeout)), router.WithMaxRetries(f.maxRetries), router.WithSeed(f.seed),
		router.WithAbortOnUnhealthy(f.abortUnhealthy), router.WithSGLangBugs(f.bugs)}
	if fb, err := router.ParseFallback(f.pdFallback); err != nil {
		bad("pd-fallback", "%q is unknown (%s, %s)", f.pdFallback, router.FallbackNone, router.FallbackDecodeOnly)
	} else {
		opts = append(opts, router.WithPDFallback(fb))
	}
	switch scheduler.Semantics(f.semantics) {
	case "", scheduler.SemanticsStrict, scheduler.SemanticsSGLang: // "": strict
	default:
		bad("semantics", "%q is unknown (strict, sglang)", f.semantics)
	}
	if len(f.bugs) > 0 && scheduler.Semantics(f.semantics) != scheduler.SemanticsSGLang {
		bad("sglang-bug", "needs --semantics sglang (got %s)", f.semantics)
	}
	for _, b := range f.bugs {
		if info, _ := scheduler.LookupBug(string(b)); info.Role != "router" {
			bad("sglang-bug", "%s is a worker bug (%s); give it to the workers", b, info.Role)
		}
	}
	for _, l := range f.kvLinks {
		p, d, addr, err := parseKVLink(l)
		if err == nil && (p >= len(ps) || d >= len(ds)) {
			err = fmt.Errorf("the router has %s and %s (indexes from 0)", plural(len(ps), "prefill worker"), plural(len(ds), "decode worker"))
		}
		if err != nil {
			bad("kv-link", "%q: %s", l, userMessage(err))
			continue
		}
		opts = append(opts, router.WithKVLink(strings.TrimRight(ps[p].URL, "/"), strings.TrimRight(ds[d].URL, "/"), addr))
	}
	return ps, ds, opts, errors.Join(errs...)
}

// plural is "1 time", "2 times".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// parseKVLink parses "P:D=host:port" (P and D are worker indexes from 0).
func parseKVLink(s string) (p, d int, addr string, err error) {
	pd, addr, ok := strings.Cut(s, "=")
	pi, di, ok2 := strings.Cut(pd, ":")
	if !ok || !ok2 {
		return 0, 0, "", errors.New("want P:D=host:port")
	}
	p, err1 := strconv.Atoi(pi)
	d, err2 := strconv.Atoi(di)
	if err1 != nil || err2 != nil || p < 0 || d < 0 || p > 1<<16 || d > 1<<16 {
		return 0, 0, "", errors.New("the prefill and decode indexes must be 0, 1 and so on")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, 0, "", err
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 || host == "" {
		return 0, 0, "", fmt.Errorf("%q is not host:port", addr)
	}
	return p, d, addr, nil
}

// runRouter builds the router and serves it until ctx ends. ready, when not nil,
// receives the HTTP address once it serves (tests).
func runRouter(ctx context.Context, f *routerFlags, logw io.Writer, ready chan<- string) error {
	ps, ds, opts, err := f.workers()
	if err != nil {
		return &UsageError{Err: err}
	}
	admin, err := f.faults.adminOption()
	if err != nil {
		return &UsageError{Err: err}
	}
	base, err := newLogger(logw, f.logLevel, f.logFormat)
	if err != nil {
		return &UsageError{Err: err}
	}
	log := base.With("role", "router")
	r, err := router.New(ps, ds, append(opts, router.WithLogger(log))...)
	if err != nil {
		return &UsageError{Err: err}
	}
	r.Start()
	defer r.Close()

	model, ctxLen := f.modelName, f.contextLength
	if model == "" || ctxLen == 0 {
		m, c := decodeInfo(ctx, ds[0].URL, time.Duration(f.healthTimeout), log)
		if model == "" {
			model = m
		}
		if ctxLen == 0 {
			ctxLen = c
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("cli: --port %d: %w", f.port, err)
	}
	hopts := []api.Option{api.WithRole("router"), api.WithGatherer(r.Gatherer()), api.WithLogger(log),
		api.WithServerInfo(map[string]any{"prefill": f.prefill, "decode": f.decode}),
		api.WithRequestTimeout(time.Duration(f.requestTimeout))}
	if model != "" {
		hopts = append(hopts, api.WithModelName(model))
	}
	if ctxLen > 0 {
		hopts = append(hopts, api.WithContextLength(ctxLen))
	}
	if admin != nil {
		hopts = append(hopts, admin)
	}
	h := api.New(r, hopts...)
	log.Info("pdserver: listening", "addr", "http://"+ln.Addr().String(), "prefill", f.prefill, "decode", f.decode,
		"model", model, "context_length", ctxLen, "healthy", r.Healthy() == nil)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	err = api.Serve(ctx, ln, h, api.WithShutdownGrace(time.Duration(f.shutdownGrace)), api.WithServerLogger(log),
		api.WithLeanPaths("/v1/completions", "/v1/chat/completions")) // the PD path's front hop without net/http
	log.Info("pdserver: stopped", "err", err)
	return err
}

// decodeInfo reads the model name and context length from a decode worker's
// /server_info; zero values when it cannot (the API defaults apply).
func decodeInfo(ctx context.Context, url string, timeout time.Duration, log *slog.Logger) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/server_info", nil)
	if err != nil {
		return "", 0
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		log.Warn("pdserver: cannot read the decode worker's server_info; using defaults", "url", url, "err", err)
		return "", 0
	}
	defer resp.Body.Close()
	var info struct {
		Model         string `json:"model"`
		ContextLength int    `json:"context_length"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil || resp.StatusCode != http.StatusOK {
		log.Warn("pdserver: bad server_info from the decode worker; using defaults", "url", url, "status", resp.StatusCode, "err", err)
		return "", 0
	}
	return info.Model, info.ContextLength
}
