package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"

	"pdsoak/harness/gpu"
	"pdsoak/ledger"
	"pdsoak/version"
)

// provenance says where and how the run is made: the harness build, the host, its CPU
// and GPUs, and the command line.
func provenance(cmdline []string, g *gpu.Sampler) *ledger.Provenance {
	v := version.Get()
	p := &ledger.Provenance{
		HarnessVersion: v.Module,
		Revision:       v.RevisionString(),
		GoVersion:      runtime.Version(),
		OS:             runtime.GOOS + "/" + runtime.GOARCH,
		CommandLine:    append([]string(nil), cmdline...),
	}
	p.Host, _ = os.Hostname()
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		model = cpuModel(f)
		f.Close()
	}
	p.CPU = cpuString(model, runtime.NumCPU())
	if g.Available() {
		p.GPUs = g.Names()
	}
	return p
}

// cpuString is "<model> (<n> CPUs)", or "<n> CPUs" when the model is unknown.
func cpuString(model string, n int) string {
	plural := "s"
	if n == 1 {
		plural = ""
	}
	if model == "" {
		return fmt.Sprintf("%d CPU%s", n, plural)
	}
	return fmt.Sprintf("%s (%d CPU%s)", model, n, plural)
}

// cpuModel returns the first processor's model from /proc/cpuinfo text: "model name"
// on x86, "Model" or "Hardware" on some ARM kernels; "" when none is given.
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	fallback := ""
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if val == "" {
			continue
		}
		switch k := strings.ToLower(key); {
		case k == "model name":
			return val
		case fallback == "" && (k == "hardware" || k == "model" && !isDigits(val)):
			fallback = val
		}
	}
	return fallback
}

// isDigits reports whether s is a number (x86's "model : 85" is not a name).
func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// describeTarget writes the target event: what the target says about itself.
func (r *runner) describeTarget(ctx context.Context) {
	r.led.Emit(targetInfo(ctx, r.hc, r.log, r.tgt.URL()))
}

// targetInfo asks the target at base about itself — GET /v1/models, and a server
// version from /version or /server_info where it offers one — within targetInfoBound.
// Every question is optional: a failure is a log line, never a reason to stop the run.
func targetInfo(ctx context.Context, hc *http.Client, log *slog.Logger, base string) ledger.Event {
	ctx, cancel := context.WithTimeout(ctx, targetInfoBound)
	defer cancel()
	paths := []string{"/v1/models", "/version", "/server_info"}
	bodies := make([][]byte, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() {
			b, err := getJSON(ctx, hc, base+p)
			if err != nil {
				log.Info("target info unavailable", "url", base+p, "err", err)
				return
			}
			bodies[i] = b
		})
	}
	wg.Wait()
	ev := ledger.Event{Type: ledger.EventTarget, URL: base, Models: bodies[0]}
	for _, b := range bodies[1:] {
		if v := serverVersion(b); v != "" {
			ev.ServerVersion = v
			break
		}
	}
	return ev
}

// getJSON GETs url and returns its body when the answer is 200 with valid JSON.
func getJSON(ctx context.Context, hc *http.Client, url string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("harness: target info: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("harness: target info: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("harness: target info: %s: status %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("harness: target info: %w", err)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, fmt.Errorf("harness: target info: %s: not JSON", url)
	}
	return b, nil
}

// serverVersion reads a version from a /version or /server_info answer: an object's
// "version" string (SGLang, vLLM), or a bare JSON string; "" when there is none.
func serverVersion(body []byte) string {
	var v struct {
		Version any `json:"version"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		var s string
		if json.Unmarshal(body, &s) == nil {
			return clipVersion(s)
		}
		return ""
	}
	if s, ok := v.Version.(string); ok {
		return clipVersion(s)
	}
	return ""
}

// clipVersion keeps a version to one short line.
func clipVersion(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.ToValidUTF8(s, "")
}
