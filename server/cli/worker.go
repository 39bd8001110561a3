package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"pdsoak/kernels"
	"pdsoak/server/api"
	"pdsoak/server/engine"
	"pdsoak/server/failpoint"
)

const (
	roleColocated = engine.RoleColocated
	rolePrefill   = engine.RolePrefill
	roleDecode    = engine.RoleDecode
)

// engineShutdownBound bounds the engine's own shutdown after the HTTP server stopped.
const engineShutdownBound = 10 * time.Second

// roleHelp is the short help of a worker command.
func roleHelp(role engine.Role) string {
	switch role {
	case rolePrefill:
		return "Run a prefill worker of a PD deployment (KV bootstrap server on --disaggregation-bootstrap-port)"
	case roleDecode:
		return "Run a decode worker of a PD deployment (receives KV from prefill workers)"
	}
	return "Run a colocated worker: prefill and decode in one process, the OpenAI API on --port"
}

func newWorkerCommand(role engine.Role) *cobra.Command {
	f := defaultWorkerFlags()
	cmd := &cobra.Command{
		Use:   string(role),
		Short: roleHelp(role),
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return &UsageError{Err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				stop() // a second signal kills the process at once
			}()
			return runWorker(ctx, role, f, cmd.ErrOrStderr(), nil)
		},
	}
	f.register(cmd.Flags(), role == rolePrefill)
	return cmd
}

// poolPages sizes the KV pool in pages (engine.PoolPages), or the backend's default
// store when neither --max-total-tokens nor --device-memory-gb is given.
func poolPages(f *workerFlags, info kernels.ModelInfo) (int, error) {
	n, err := engine.PoolPages(f.engineConfig(roleColocated), info, f.pageSize())
	if n == 0 && err == nil {
		n = kernels.DefaultNumPages
	}
	return n, err
}

// worker is a built, not yet serving, worker process.
type worker struct {
	log      *slog.Logger
	eng      *engine.Engine
	handler  *api.Handler
	ln       net.Listener
	closers  []func() error
	grace    time.Duration
	info     map[string]any
	bootAddr string
	role     engine.Role
}

// buildWorker turns validated flags into a started engine and a bound listener.
func buildWorker(role engine.Role, f *workerFlags, logw ioWriter) (*worker, error) {
	base, err := newLogger(logw, f.logLevel, f.logFormat)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("--log-level: %w", err)}
	}
	log := base.With("role", string(role)) // the engine adds its role itself
	kc := f.kernelsConfig()
	info, err := kernels.Describe(kc)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("--backend %s --model-name %s: %w", f.backend, f.modelName, err)}
	}
	pages, err := poolPages(f, info)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	kc.NumPages = pages
	backend, err := kernels.New(kc)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("a KV pool of %d pages (--max-total-tokens, or --mem-fraction-static × --device-memory-gb): %w", pages, err)}
	}
	w := &worker{log: log, role: role, grace: time.Duration(f.shutdownGrace), info: map[string]any{
		"semantics": f.limits.Semantics, "backend": f.backend, "page_size": f.pageSize(), "pool_pages": pages,
		"pool_tokens": pages * f.pageSize(), "max_queued_requests": f.limits.MaxQueuedRequests,
		"max_running_requests": f.limits.MaxRunningRequests,
		"kv_bytes_per_token":   info.ModelKVBytesPerToken, "seed": f.seed, "vocab_size": info.VocabSize,
	}}
	if f.backend != kernels.BackendTinyRef {
		w.info["sim_profile"] = f.simProfile
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []engine.Option{engine.WithRegisterer(reg), engine.WithLogger(base)}
	if role != roleColocated {
		t, err := newTransfer(role, backend, f, reg, log)
		if err != nil {
			return nil, err
		}
		w.closers = append(w.closers, t.Close)
		opts = append(opts, engine.WithTransfer(t))
		if t.bootstrapAddr != "" {
			w.bootAddr = t.bootstrapAddr
			w.info["bootstrap_addr"] = t.bootstrapAddr
		}
	}
	eng, err := engine.New(backend, f.engineConfig(role), opts...)
	if err != nil {
		w.close()
		return nil, &UsageError{Err: err}
	}
	w.eng = eng
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		w.close()
		return nil, fmt.Errorf("cli: --port %d: %w", f.port, err)
	}
	w.ln = ln
	hopts := []api.Option{
		api.WithModelName(f.modelName), api.WithContextLength(f.limits.ContextLength), api.WithVocabSize(info.VocabSize),
		api.WithGatherer(reg), api.WithLogger(log), api.WithRole(string(role)), api.WithServerInfo(w.info),
	}
	if f.enableFaultInjection {
		hopts = append(hopts, api.WithAdminHandler(failpoint.AdminHandler(f.faultToken)))
	}
	w.handler = api.New(eng, hopts...)
	eng.Start()
	return w, nil
}

func (w *worker) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		if err := w.closers[i](); err != nil {
			w.log.Warn("cli: close", "err", err)
		}
	}
	w.closers = nil
}

// run serves until ctx ends, then shuts down: HTTP first (drain, grace, abort), then
// the engine, then the transfer.
func (w *worker) run(ctx context.Context) error {
	w.log.Info("pdserver: listening", "addr", "http://"+w.ln.Addr().String(), "bootstrap_addr", w.bootAddr,
		"pool_pages", w.info["pool_pages"], "semantics", w.info["semantics"])
	sopts := []api.ServerOption{api.WithShutdownGrace(w.grace), api.WithServerLogger(w.log)}
	if w.role != roleColocated {
		sopts = append(sopts, api.WithLeanGenerate()) // the router's legs: /generate without net/http
	}
	err := api.Serve(ctx, w.ln, w.handler, sopts...)
	w.log.Info("pdserver: HTTP server stopped; stopping the engine", "err", err)
	sctx, cancel := context.WithTimeout(context.Background(), engineShutdownBound)
	defer cancel()
	if serr := w.eng.Shutdown(sctx); serr != nil {
		err = errors.Join(err, fmt.Errorf("cli: engine shutdown: %w", serr))
	}
	w.close()
	w.log.Info("pdserver: stopped")
	return err
}

// runWorker builds and runs a worker until ctx ends. ready, when not nil, receives the
// HTTP address once the worker serves (tests).
func runWorker(ctx context.Context, role engine.Role, f *workerFlags, logw ioWriter, ready chan<- string) error {
	w, err := buildWorker(role, f, logw)
	if err != nil {
		return err
	}
	if ready != nil {
		ready <- w.ln.Addr().String()
	}
	return w.run(ctx)
}
