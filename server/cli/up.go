package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdsoak/server/launcher"
)

// upOwnFlags are worker flags that `up` sets itself for every process.
var upOwnFlags = map[string]bool{"host": true, "port": true, "disaggregation-bootstrap-port": true}

// upRouterFlags are worker flags that also go to the router (semantics: so that sglang
// workers never sit behind a strict router).
var upRouterFlags = map[string]bool{"log-level": true, "log-format": true, "shutdown-grace": true, "seed": true, "semantics": true}

func newUpCommand() *cobra.Command {
	var (
		nPrefill, nDecode, port int
		host, logDir            string
		healthTimeout           = secondsValue(launcher.DefaultHealthTimeout)
		stopTimeout             = secondsValue(launcher.DefaultStopTimeout)
		routerArgs              []string
		nsOpts                  netnsOptions
	)
	wf := defaultWorkerFlags()
	cmd := &cobra.Command{
		Use:   "up [worker flags] [-- extra worker arguments]",
		Short: "Start a local PD topology: P prefill and D decode workers and a router, as child processes",
		Long: `up starts --prefill P prefill workers and --decode D decode workers on free loopback ports, waits
for their /health, starts the router on --port pointing at them, waits for its /health and prints
the router URL. It runs until SIGINT or SIGTERM, then stops every child (SIGTERM, then SIGKILL after
--stop-timeout), or until the router exits (then it stops the workers and exits 1; a worker that
dies is only reported). Children are in their own process groups and die with this process even if
it is killed with SIGKILL.

Worker flags (the flags of the colocated command: --backend, --seed, --semantics, --max-queued-requests,
...) are accepted here with the same names and passed to every worker when given; --host is used
by every process; --port is the router's. Arguments after "--" are passed to every worker verbatim.
--router-arg passes one argument to the router. Logs go to --log-dir (one file per process).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if nPrefill < 1 || nDecode < 1 {
				return usageErrorf("up: --prefill and --decode must be at least 1 (got %d, %d)", nPrefill, nDecode)
			}
			if err := wf.validate(); err != nil {
				return &UsageError{Err: err}
			}
			dash := cmd.ArgsLenAtDash()
			if (dash < 0 && len(args) > 0) || dash > 0 {
				return usageErrorf("up: unexpected argument %q (worker arguments go after --)", args[0])
			}
			common, rargs := forwardedFlags(cmd.Flags())
			if dash == 0 {
				common = append(common, args...)
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("cli: up: %w", err)
			}
			// When pdserver is a subcommand of another binary (harness pdserver up), the
			// children need the same prefix.
			path := strings.Fields(cmd.CommandPath())
			command := append([]string{exe}, path[1:len(path)-1]...)
			log, err := newLogger(cmd.ErrOrStderr(), wf.logLevel, wf.logFormat)
			if err != nil {
				return &UsageError{Err: err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			routerDied := make(chan launcher.Process, 1)
			place, closeNet, err := nsOpts.start(ctx, cmd.OutOrStdout(), nPrefill, nDecode)
			if err != nil {
				return err
			}
			defer closeNet()
			topo, err := launcher.Start(ctx, launcher.Config{
				Place:   place,
				Command: command, Prefill: nPrefill, Decode: nDecode, Host: host, Port: port,
				CommonArgs: common, RouterArgs: append(rargs, routerArgs...), LogDir: logDir,
				HealthTimeout: time.Duration(healthTimeout), StopTimeout: time.Duration(stopTimeout),
				Logger: log.With("role", "up"),
				OnExit: func(p launcher.Process) {
					fmt.Fprintf(cmd.ErrOrStderr(), "pdserver up: %s (pid %d) exited: %s; log %s\n", p.Name, p.PID, p.Exit, p.LogPath)
					if p.Role == launcher.RoleRouter {
						select {
						case routerDied <- p:
						default:
						}
					}
				},
			})
			if err != nil {
				return fmt.Errorf("cli: up: %w", err)
			}
			out := cmd.OutOrStdout()
			for _, p := range topo.Processes() {
				fmt.Fprintf(out, "%-10s pid %-7d %s  log %s\n", p.Name, p.PID, p.URL, p.LogPath)
			}
			fmt.Fprintf(out, "router: %s\n", topo.RouterURL)
			var died error
			select {
			case <-ctx.Done():
			case p := <-routerDied: // workers may die and be restarted; without the router nothing is served
				died = fmt.Errorf("cli: up: the router exited (%s); log %s", p.Exit, p.LogPath)
			}
			stop()
			fmt.Fprintln(cmd.ErrOrStderr(), "pdserver up: stopping every process")
			sctx, cancel := context.WithTimeout(context.Background(), time.Duration(stopTimeout)+5*time.Second)
			defer cancel()
			return errors.Join(died, topo.Stop(sctx))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&nPrefill, "prefill", 1, "number of prefill workers")
	fs.IntVar(&nDecode, "decode", 1, "number of decode workers")
	fs.IntVar(&port, "port", DefaultPort, "router port (0 picks a free one)")
	fs.StringVar(&host, "host", launcher.DefaultHost, "address every process binds")
	fs.StringVar(&logDir, "log-dir", "", "directory of the processes' logs (default: a new temporary directory)")
	fs.Var(&healthTimeout, "health-timeout", "bound of the wait for every process's /health")
	fs.Var(&stopTimeout, "stop-timeout", "SIGTERM→SIGKILL bound when stopping")
	nsOpts.register(fs)
	fs.StringArrayVar(&routerArgs, "router-arg", nil, "one argument for the router, e.g. --router-arg=--health-interval=0.5 (repeatable)")
	workerFS := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	wf.register(workerFS, true)
	workerFS.VisitAll(func(fl *pflag.Flag) {
		if !upOwnFlags[fl.Name] {
			fs.AddFlag(fl)
		}
	})
	return cmd
}

// forwardedFlags returns the worker flags given on the command line, as arguments for
// every worker, and the subset the router shares.
func forwardedFlags(fs *pflag.FlagSet) (workers, router []string) {
	own := map[string]bool{"prefill": true, "decode": true, "port": true, "host": true, "log-dir": true,
		"health-timeout": true, "stop-timeout": true, "router-arg": true, "netns": true, "netns-prefix": true}
	fs.Visit(func(fl *pflag.Flag) {
		if own[fl.Name] || fl.Name == "help" {
			return
		}
		arg := fmt.Sprintf("--%s=%s", fl.Name, fl.Value.String())
		workers = append(workers, arg)
		if upRouterFlags[fl.Name] {
			router = append(router, arg)
		}
	})
	return workers, router
}
