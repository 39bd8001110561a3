// Command fakepd stands in for pdserver in the launcher's tests: it serves /health and
// /args on --port (and listens on --disaggregation-bootstrap-port), whatever the role.
// FAKEPD_EXIT=<role> makes that role exit at once; FAKEPD_IGNORE_TERM=1 ignores SIGTERM;
// FAKEPD_CLASH_ONCE=<file> makes the first decode fail as if its port were taken.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fakepd: role required")
		os.Exit(2)
	}
	role := args[0]
	if f := os.Getenv("FAKEPD_CLASH_ONCE"); f != "" && role == "decode" {
		if _, err := os.Stat(f); err != nil {
			os.WriteFile(f, nil, 0o644)
			fmt.Fprintln(os.Stderr, "fakepd: listen tcp: bind: address already in use")
			os.Exit(1)
		}
	}
	if os.Getenv("FAKEPD_EXIT") == role {
		fmt.Fprintln(os.Stderr, "fakepd: told to fail")
		os.Exit(3)
	}
	host, port, boot := "127.0.0.1", "", ""
	for i := 1; i+1 < len(args); i++ {
		switch args[i] {
		case "--host":
			host = args[i+1]
		case "--port":
			port = args[i+1]
		case "--disaggregation-bootstrap-port":
			boot = args[i+1]
		}
	}
	if boot != "" {
		bl, err := net.Listen("tcp", net.JoinHostPort(host, boot))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakepd:", err)
			os.Exit(1)
		}
		defer bl.Close()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakepd:", err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/args", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"args": args, "pid": os.Getpid(), "env": os.Getenv("FAKEPD_MARK")})
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for range sig {
			if os.Getenv("FAKEPD_IGNORE_TERM") != "1" {
				fmt.Println("fakepd: terminated")
				os.Exit(0)
			}
		}
	}()
	fmt.Println("fakepd: serving", role, ln.Addr())
	_ = http.Serve(ln, mux)
}
