package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"pdsoak/server/engine"
)

// The SGLang launch spelling: `pdserver sglang-server ARGS...` takes
// `python3 -m sglang.launch_server`'s flags and `pdserver sglang-router ARGS...` takes
// `python3 -m sglang_router.launch_router`'s, so one scenario pack launches either SGLang
// on a GPU runner or the reference server on a laptop. Both translate their arguments
// onto the worker and router commands and run those.

// PDSoakPrefix marks pdserver's own flags inside an SGLang command line:
// --pdsoak-semantics sglang is --semantics sglang.
const PDSoakPrefix = "--pdsoak-"

// SemanticsEnv sets --semantics of sglang-server when the command line does not.
const SemanticsEnv = "PDSOAK_SEMANTICS"

// serverValueFlags are launch_server flags that map onto a worker flag of the same
// meaning (value taken).
var serverValueFlags = map[string]string{
	"--host":                          "--host",
	"--port":                          "--port",
	"--disaggregation-bootstrap-port": "--disaggregation-bootstrap-port",
	"--max-queued-requests":           "--max-queued-requests",
	"--max-running-requests":          "--max-running-requests",
	"--context-length":                "--context-length",
	"--mem-fraction-static":           "--mem-fraction-static",
	"--max-total-tokens":              "--max-total-tokens",
	"--page-size":                     "--page-size",
	"--cuda-graph-max-bs":             "--cuda-graph-max-bs",
	"--chunked-prefill-size":          "--chunked-prefill-size",
	"--max-prefill-tokens":            "--max-prefill-tokens",
	"--watchdog-timeout":              "--watchdog-timeout",
	"--decode-log-interval":           "--decode-log-interval",
	"--log-level":                     "--log-level",
	"--served-model-name":             "--model-name",
	"--random-seed":                   "--seed",
}

// serverBoolFlags map onto a worker bool flag.
var serverBoolFlags = map[string]string{
	"--disable-overlap-schedule": "--disable-overlap-schedule",
}

// serverRecorded are launch_server flags recorded in the startup line but with no
// effect here (there is no model, GPU or transfer engine to choose).
var serverRecorded = map[string]bool{
	"--model-path": true, "--model": true, "--disaggregation-transfer-backend": true, "--base-gpu-id": true,
}

// serverEnvTimeouts are SGLang's PD timeout and heartbeat environment variables (seconds,
// or a count for HEARTBEAT_MAX_FAILURE) and the worker flags they set. SGLANG_DISAGGREGATION_WAITING_TIMEOUT bounds decode's wait for
// the KV transfer: it is --transfer-timeout, which the sglang semantics ignore (the
// incident's SGLang had no such bound).
var serverEnvTimeouts = []struct{ env, flag string }{
	{"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", "--bootstrap-timeout"},
	{"SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "--transfer-timeout"},
	{"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", "--kv-heartbeat-interval"},
	{"SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", "--kv-heartbeat-max-failure"},
}

// sglangArgs is an SGLang command line split into flags.
type sglangArg struct {
	name  string // "--port"
	value string
	has   bool // a value was given
}

// splitSGLangArgs splits argv into flags and their values the way argparse would for
// flags it does not know: --flag=value, or --flag value when the next word is not a
// flag, or a bare --flag. nargs2 lists flags that take one or two values (the router's
// --prefill URL [BOOTSTRAP_PORT]): their second value lands in the next element with an
// empty name. A word that is not a flag and follows no flag is an error.
func splitSGLangArgs(argv []string, bools map[string]bool) ([]sglangArg, error) {
	var out []sglangArg
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "--") || a == "--" {
			return nil, fmt.Errorf("unexpected argument %q (SGLang's launchers take only --flags)", a)
		}
		if name, v, ok := strings.Cut(a, "="); ok {
			out = append(out, sglangArg{name: name, value: v, has: true})
			continue
		}
		if !bools[a] && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
			out = append(out, sglangArg{name: a, value: argv[i+1], has: true})
			i++
			continue
		}
		out = append(out, sglangArg{name: a})
	}
	return out, nil
}

// serverTranslation is the result of translating a launch_server command line.
type serverTranslation struct {
	role     engine.Role
	args     []string // the worker command's arguments
	recorded []string // "--model-path=/m" and the like: accepted, no effect
	ignored  []string // unknown SGLang flags, accepted, no effect
	env      []string // SGLANG_* variables honoured or recorded
}

// translateServer maps a launch_server command line onto the worker commands.
func translateServer(argv []string, getenv func(string) string) (serverTranslation, error) {
	bools := map[string]bool{"--enable-metrics": true, "--disable-overlap-schedule": true, "--trust-remote-code": true,
		"--skip-server-warmup": true, "--disable-radix-cache": true, "--disable-cuda-graph": true, "--enable-dp-attention": true}
	parts, err := splitSGLangArgs(argv, bools)
	if err != nil {
		return serverTranslation{}, err
	}
	tr := serverTranslation{role: roleColocated}
	semanticsSet := false
	for _, p := range parts {
		switch {
		case strings.HasPrefix(p.name, PDSoakPrefix):
			own := "--" + strings.TrimPrefix(p.name, PDSoakPrefix)
			if own == "--semantics" {
				semanticsSet = true
			}
			if p.has {
				tr.args = append(tr.args, own+"="+p.value)
			} else {
				tr.args = append(tr.args, own)
			}
		case p.name == "--disaggregation-mode":
			switch p.value {
			case "prefill":
				tr.role = rolePrefill
			case "decode":
				tr.role = roleDecode
			case "null", "":
				tr.role = roleColocated
			default:
				return tr, fmt.Errorf("--disaggregation-mode %q is unknown (null, prefill, decode)", p.value)
			}
		case serverValueFlags[p.name] != "":
			if !p.has {
				return tr, fmt.Errorf("%s needs a value", p.name)
			}
			tr.args = append(tr.args, serverValueFlags[p.name]+"="+p.value)
		case serverBoolFlags[p.name] != "":
			tr.args = append(tr.args, serverBoolFlags[p.name])
		case p.name == "--enable-metrics":
			// /metrics is always served here.
		case serverRecorded[p.name]:
			if p.name == "--disaggregation-transfer-backend" {
				switch p.value {
				case "mooncake", "nixl", "ascend", "fake":
				default:
					return tr, fmt.Errorf("--disaggregation-transfer-backend %q is unknown (mooncake, nixl, ascend, fake)", p.value)
				}
			}
			tr.recorded = append(tr.recorded, p.name+"="+p.value)
		default:
			if p.has {
				tr.ignored = append(tr.ignored, p.name+"="+p.value)
			} else {
				tr.ignored = append(tr.ignored, p.name)
			}
		}
	}
	if tr.role != rolePrefill {
		// Only prefill serves a bootstrap port; SGLang accepts the flag everywhere.
		kept := tr.args[:0]
		for _, a := range tr.args {
			if strings.HasPrefix(a, "--disaggregation-bootstrap-port=") {
				tr.recorded = append(tr.recorded, a)
				continue
			}
			kept = append(kept, a)
		}
		tr.args = kept
	}
	if s := getenv(SemanticsEnv); s != "" && !semanticsSet {
		tr.args = append(tr.args, "--semantics="+s)
		tr.env = append(tr.env, SemanticsEnv+"="+s)
	}
	for _, e := range serverEnvTimeouts {
		if v := getenv(e.env); v != "" {
			if tr.role == roleColocated {
				tr.env = append(tr.env, e.env+"="+v+" (no effect: colocated)")
				continue
			}
			tr.args = append(tr.args, e.flag+"="+v)
			tr.env = append(tr.env, e.env+"="+v)
		}
	}
	return tr, nil
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

func newSGLangServerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sglang-server [SGLANG FLAGS]",
		Short: "Run a worker from python3 -m sglang.launch_server's command line (PD flags mapped onto prefill, decode or colocated)",
		Long: `sglang-server takes sglang.launch_server's flags for what pdserver implements and runs the
matching worker: --disaggregation-mode prefill or decode (none: colocated), --host, --port,
--disaggregation-bootstrap-port, --max-queued-requests, --max-running-requests, --context-length,
--mem-fraction-static, --max-total-tokens, --page-size, --cuda-graph-max-bs, --chunked-prefill-size,
--max-prefill-tokens, --watchdog-timeout, --decode-log-interval, --disable-overlap-schedule,
--served-model-name, --random-seed, --log-level. --model-path, --disaggregation-transfer-backend and
--base-gpu-id are recorded; --enable-metrics is implied. Any other SGLang flag is accepted, has no
effect here, and is listed in the startup log line.

Environment: SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (seconds) is --bootstrap-timeout,
SGLANG_DISAGGREGATION_WAITING_TIMEOUT is --transfer-timeout (ignored by --semantics sglang),
SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL and _MAX_FAILURE are --kv-heartbeat-interval and
--kv-heartbeat-max-failure (the KV link is dead after interval × max failures of silence).

pdserver's own flags pass through with a --pdsoak- prefix (--pdsoak-semantics sglang,
--pdsoak-backend simtime, --pdsoak-enable-fault-injection); PDSOAK_SEMANTICS sets --semantics.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			tr, err := translateServer(args, os.Getenv)
			if err != nil {
				return usageErrorf("sglang-server: %v", err)
			}
			slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).Info("sglang-server: SGLang command line mapped",
				"role", string(tr.role), "args", strings.Join(tr.args, " "),
				"recorded", strings.Join(tr.recorded, " "), "no_effect_here", strings.Join(tr.ignored, " "),
				"env", strings.Join(tr.env, " "))
			return runTranslated(cmd, newWorkerCommand(tr.role), tr.args)
		},
	}
	return cmd
}

// runTranslated runs sub (a worker or router command) with args, under cmd's context
// and output.
func runTranslated(cmd, sub *cobra.Command, args []string) error {
	sub.SetArgs(args)
	sub.SetOut(cmd.OutOrStdout())
	sub.SetErr(cmd.ErrOrStderr())
	sub.SilenceErrors, sub.SilenceUsage = true, true
	sub.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &UsageError{Err: err} })
	return sub.ExecuteContext(cmd.Context())
}

// routerValueFlags map launch_router flags onto the router command's.
var routerValueFlags = map[string]string{
	"--host":                       "--host",
	"--port":                       "--port",
	"--health-check-interval-secs": "--health-interval",
	"--health-check-timeout-secs":  "--health-timeout",
	"--retry-max-retries":          "--max-retries",
	"--request-timeout-secs":       "--request-timeout",
	"--log-level":                  "--log-level",
	"--random-seed":                "--seed",
}

// routerTranslation is the result of translating a launch_router command line.
type routerTranslation struct {
	args        []string
	ignored     []string
	metricsAddr string // --prometheus-host:--prometheus-port, served as a /metrics forwarder
	routerAddr  string // --host:--port, where the forwarder sends /metrics
}

// translateRouter maps a launch_router command line onto the router command. --prefill
// takes a URL and an optional bootstrap port (a number or "none").
func translateRouter(argv []string) (routerTranslation, error) {
	var tr routerTranslation
	pd := false
	type prefill struct{ url, boot string }
	var prefills []prefill
	promHost, promPort := "127.0.0.1", ""
	host, port := "127.0.0.1", strconv.Itoa(DefaultPort)
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		name, inline, hasInline := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "--") {
			return tr, fmt.Errorf("unexpected argument %q", a)
		}
		// values: the inline one, or the words up to the next flag.
		var vals []string
		if hasInline {
			vals = []string{inline}
		} else {
			for i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				vals = append(vals, argv[i+1])
				i++
			}
		}
		one := func() (string, error) {
			if len(vals) != 1 {
				return "", fmt.Errorf("%s takes one value, got %d", name, len(vals))
			}
			return vals[0], nil
		}
		switch {
		case name == "--pd-disaggregation":
			pd = true
		case strings.HasPrefix(name, PDSoakPrefix):
			own := "--" + strings.TrimPrefix(name, PDSoakPrefix)
			if len(vals) == 0 {
				tr.args = append(tr.args, own)
			}
			for _, v := range vals {
				tr.args = append(tr.args, own+"="+v)
			}
		case name == "--prefill":
			if len(vals) < 1 || len(vals) > 2 {
				return tr, fmt.Errorf("--prefill takes URL [BOOTSTRAP_PORT], got %d values", len(vals))
			}
			p := prefill{url: vals[0]}
			if len(vals) == 2 && vals[1] != "none" {
				if n, err := strconv.Atoi(vals[1]); err != nil || n <= 0 || n > 65535 {
					return tr, fmt.Errorf("--prefill %s: bootstrap port %q is not a port (or none)", vals[0], vals[1])
				}
				p.boot = vals[1]
			}
			prefills = append(prefills, p)
		case name == "--decode":
			v, err := one()
			if err != nil {
				return tr, err
			}
			tr.args = append(tr.args, "--decode="+v)
		case name == "--prometheus-port":
			v, err := one()
			if err != nil {
				return tr, err
			}
			promPort = v
		case name == "--prometheus-host":
			v, err := one()
			if err != nil {
				return tr, err
			}
			promHost = v
		case routerValueFlags[name] != "":
			v, err := one()
			if err != nil {
				return tr, err
			}
			switch name {
			case "--host":
				host = v
			case "--port":
				port = v
			}
			tr.args = append(tr.args, routerValueFlags[name]+"="+v)
		default:
			tr.ignored = append(tr.ignored, strings.TrimSpace(name+" "+strings.Join(vals, " ")))
		}
	}
	if !pd {
		return tr, errors.New("only --pd-disaggregation routing is implemented here (with --prefill and --decode)")
	}
	anyBoot := false
	for _, p := range prefills {
		anyBoot = anyBoot || p.boot != ""
	}
	for _, p := range prefills {
		tr.args = append(tr.args, "--prefill="+p.url)
		if !anyBoot {
			continue
		}
		u, err := url.Parse(p.url)
		if err != nil || u.Hostname() == "" {
			return tr, fmt.Errorf("--prefill %q is not a URL", p.url)
		}
		boot := p.boot
		if boot == "" {
			boot = strconv.Itoa(DefaultBootstrapPort)
		}
		tr.args = append(tr.args, "--prefill-bootstrap="+net.JoinHostPort(u.Hostname(), boot))
	}
	if promPort != "" {
		tr.metricsAddr = net.JoinHostPort(promHost, promPort)
		if host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		tr.routerAddr = net.JoinHostPort(host, port)
	}
	return tr, nil
}

func newSGLangRouterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sglang-router [SGLANG ROUTER FLAGS]",
		Short: "Run the router from python3 -m sglang_router.launch_router's command line (--pd-disaggregation)",
		Long: `sglang-router takes sglang_router.launch_router's flags: --pd-disaggregation, --prefill URL
[BOOTSTRAP_PORT|none] (repeatable), --decode URL (repeatable), --host, --port,
--health-check-interval-secs, --health-check-timeout-secs, --retry-max-retries,
--request-timeout-secs, --random-seed, --log-level. --prometheus-host/--prometheus-port serve the
router's /metrics there too, as SGLang's router does. Other flags (--policy, ...) are accepted,
have no effect here, and are listed in the startup log line. pdserver's own router flags pass
through with a --pdsoak- prefix (--pdsoak-max-retries 0).`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			tr, err := translateRouter(args)
			if err != nil {
				return usageErrorf("sglang-router: %v", err)
			}
			slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).Info("sglang-router: SGLang command line mapped",
				"args", strings.Join(tr.args, " "), "metrics", tr.metricsAddr, "no_effect_here", strings.Join(tr.ignored, " "))
			if tr.metricsAddr == "" {
				return runTranslated(cmd, newRouterCommand(), tr.args)
			}
			return runRouterWithMetrics(cmd, tr)
		},
	}
	return cmd
}

// runRouterWithMetrics runs the router and forwards GET /metrics on tr.metricsAddr to
// the router's own /metrics, the address SGLang's router exports Prometheus on.
func runRouterWithMetrics(cmd *cobra.Command, tr routerTranslation) error {
	ln, err := net.Listen("tcp", tr.metricsAddr)
	if err != nil {
		return fmt.Errorf("cli: sglang-router: --prometheus-port: %w", err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: tr.routerAddr})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", proxy)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	err = runTranslated(cmd, newRouterCommand(), tr.args)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return err
}
