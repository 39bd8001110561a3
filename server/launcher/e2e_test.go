package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/failpoint"
	"pdsoak/sse"
)

var builtDir string

// pdserverPath builds cmd/pdserver once for the tests that need the real server; it
// skips them when the tree does not build.
var pdserverPath = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "launcher-pdserver-")
	if err != nil {
		return "", err
	}
	builtDir = dir // removed by TestMain
	exe := filepath.Join(dir, "pdserver")
	if out, err := exec.Command("go", "build", "-o", exe, "pdsoak/cmd/pdserver").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pdserver: %v\n%s", err, out)
	}
	return exe, nil
})

func realServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real pdserver processes: not in -short")
	}
	exe, err := pdserverPath()
	if err != nil {
		t.Fatalf("build pdserver: %v", err)
	}
	return exe
}

// outcome is how one streamed completion ended.
type outcome struct {
	status int
	text   string
	done   bool   // [DONE] seen
	errMsg string // error event or error body
}

// complete sends a streaming greedy completion and reads it to its end.
func complete(ctx context.Context, url, prompt string, maxTokens int) (outcome, error) {
	body, _ := json.Marshal(map[string]any{"model": "ref", "prompt": prompt, "max_tokens": maxTokens,
		"temperature": 0, "stream": true, "ignore_eos": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return outcome{}, err
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		o.errMsg = string(b)
		return o, nil
	}
	sr := sse.NewReader(resp.Body)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return o, nil
		}
		if err != nil {
			return o, err
		}
		if ev.Comment {
			continue
		}
		data := ev.Data
		if data == "[DONE]" {
			o.done = true
			break
		}
		var c struct {
			Choices []struct{ Text string }
			Error   *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return o, err
		}
		if c.Error != nil {
			o.errMsg = c.Error.Message
		}
		for _, ch := range c.Choices {
			o.text += ch.Text
		}
	}
	return o, nil
}

// TestRealTopologyWorkerKilled runs router + prefill + decode from the real pdserver:
// requests complete; killing a worker resolves the request in flight (an explicit error
// when decode dies under it), later requests are refused (503) rather than hung, the
// router reports itself unhealthy, and traffic recovers after the worker is restarted.
func TestRealTopologyWorkerKilled(t *testing.T) {
	exe := realServer(t)
	for _, victim := range []string{"decode-0", "prefill-0"} {
		t.Run(victim, func(t *testing.T) { killAndRecover(t, exe, victim) })
	}
}

func killAndRecover(t *testing.T, exe, victim string) {
	topo, err := Start(context.Background(), Config{Command: []string{exe}, Prefill: 1, Decode: 1, LogDir: t.TempDir(),
		CommonArgs:    []string{"--backend", "tinyref", "--seed", "1", "--log-level", "warn"},
		RouterArgs:    []string{"--health-interval", "0.1", "--log-level", "warn"},
		HealthTimeout: 60 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	texts := make([]outcome, 4)
	for i := range texts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := complete(ctx, topo.RouterURL, "Hello PD world", 8)
			if err != nil {
				o.errMsg = err.Error()
			}
			texts[i] = o
		}()
	}
	wg.Wait()
	for i, o := range texts {
		if o.status != 200 || !o.done || o.text == "" || o.text != texts[0].text {
			t.Fatalf("request %d: %+v (first %+v)", i, o, texts[0])
		}
	}

	// A long stream, then the victim dies under it.
	long := make(chan outcome, 1)
	go func() {
		o, err := complete(ctx, topo.RouterURL, "a long one", 4000)
		if err != nil {
			o.errMsg += " transport: " + err.Error()
		}
		long <- o
	}()
	// Kill once the stream is in flight (decode generating it), an event, not a guess.
	dec, err := topo.Process("decode-0")
	if err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool {
		resp, err := client.Get(dec.URL + "/debug/requests")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"stage":"running"`)
	}, time.Minute, 5*time.Millisecond, "the long stream never ran on decode-0")
	killedAt := time.Now()
	if err := topo.Kill(victim); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-long:
		if o.status == 200 && !o.done && o.errMsg == "" {
			t.Fatalf("stream cut without an explicit error: %+v", o)
		}
		if victim == "decode-0" && o.done {
			t.Fatalf("stream through a killed decode ended as a success: %+v", o)
		}
		t.Logf("in-flight stream: status %d done %v after %s: %.120s", o.status, o.done, time.Since(killedAt), o.errMsg)
	case <-ctx.Done():
		t.Fatal("request in flight when the worker died never resolved")
	}
	o, err := complete(ctx, topo.RouterURL, "anyone there", 4)
	if err != nil || o.status != http.StatusServiceUnavailable {
		t.Fatalf("with %s down: %+v, %v", victim, o, err)
	}
	resp, err := client.Get(topo.RouterURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("router /health %d with %s down", resp.StatusCode, victim)
	}

	if err := topo.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	// Bounded by time a loaded machine keeps, not by a count of tries.
	recovered := time.Now().Add(time.Minute)
	for {
		o, err := complete(ctx, topo.RouterURL, "Hello PD world", 8)
		if err == nil && o.status == 200 && o.done {
			if o.text != texts[0].text {
				t.Fatalf("after restart %q, before %q", o.text, texts[0].text)
			}
			break
		}
		if time.Now().After(recovered) {
			t.Fatalf("traffic did not recover: %+v %v", o, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUpCommand runs `pdserver up`, sends a request through it, then SIGTERMs it: it
// exits 0 and takes every child with it.
func TestUpCommand(t *testing.T) {
	exe := realServer(t)
	cmd := exec.Command(exe, "up", "--prefill", "1", "--decode", "1", "--port", "0", "--log-dir", t.TempDir(),
		"--backend", "tinyref", "--log-level", "warn", "--semantics", "sglang", "--", "--max-running-requests", "7")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var url string
	var pids []int
	urls := map[string]string{}
	for sc.Scan() {
		line := sc.Text()
		var name, purl string
		var pid int
		if n, _ := fmt.Sscanf(line, "%s pid %d %s", &name, &pid, &purl); n == 3 {
			pids = append(pids, pid)
			urls[name] = purl
		}
		if u, ok := strings.CutPrefix(line, "router: "); ok {
			url = u
			break
		}
	}
	if url == "" || len(pids) != 3 {
		t.Fatalf("up printed url %q, pids %v", url, pids)
	}
	go io.Copy(io.Discard, out)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := complete(ctx, url, "hi", 4)
	if err != nil || o.status != 200 || !o.done {
		t.Fatalf("through up: %+v %v", o, err)
	}
	// Worker flags given by name and arguments after -- reach the workers.
	resp, err := client.Get(urls["decode-0"] + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Semantics  string `json:"semantics"`
		MaxRunning int    `json:"max_running_requests"`
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.Semantics != "sglang" || info.MaxRunning != 7 {
		t.Fatalf("decode server_info %+v", info)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("up exited with %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("child %d outlived up", pid)
		}
	}
}

// TestRealTopologyCorruptedPage flips a byte of one KV frame in flight (the prefill
// worker's kvtransfer/send-frame failpoint): exactly that request fails with an explicit
// kv_transfer_failed error; the others, before and after, return the same greedy text.
func TestRealTopologyCorruptedPage(t *testing.T) {
	exe := realServer(t)
	topo, err := Start(context.Background(), Config{Command: []string{exe}, Prefill: 1, Decode: 1, LogDir: t.TempDir(),
		CommonArgs:    []string{"--backend", "tinyref", "--seed", "1", "--log-level", "warn", "--enable-fault-injection"},
		FaultToken:    "t0ken",
		RouterArgs:    []string{"--log-level", "warn"},
		HealthTimeout: 60 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want, err := complete(ctx, topo.RouterURL, "checksum me", 8)
	if err != nil || !want.done {
		t.Fatalf("%+v %v", want, err)
	}
	pre, _ := topo.Process("prefill-0")
	fp := failpoint.NewClient(pre.URL, "t0ken")
	if _, err := fp.Enable(ctx, failpoint.KVTransferSendFrame, "1*return(corrupt)"); err != nil {
		t.Fatal(err)
	}
	bad, err := complete(ctx, topo.RouterURL, "checksum me", 8)
	if err != nil || bad.done || !strings.Contains(bad.errMsg, "checksum") {
		t.Fatalf("corrupted request: %+v %v", bad, err)
	}
	t.Logf("corrupted request: status %d: %.160s", bad.status, bad.errMsg)
	for i := 0; i < 3; i++ {
		o, err := complete(ctx, topo.RouterURL, "checksum me", 8)
		if err != nil || !o.done || o.text != want.text {
			t.Fatalf("request after the corrupted one: %+v %v", o, err)
		}
	}
}

// TestUpExitsWhenRouterDies: without its router the topology serves nothing, so `up`
// stops the workers and exits 1.
func TestUpExitsWhenRouterDies(t *testing.T) {
	exe := realServer(t)
	cmd := exec.Command(exe, "up", "--port", "0", "--log-dir", t.TempDir(), "--log-level", "warn")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	pids := map[string]int{}
	for sc.Scan() {
		var name, url string
		var pid int
		if n, _ := fmt.Sscanf(sc.Text(), "%s pid %d %s", &name, &pid, &url); n == 3 {
			pids[name] = pid
		}
		if strings.HasPrefix(sc.Text(), "router: ") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	if len(pids) != 3 {
		t.Fatalf("pids %v", pids)
	}
	syscall.Kill(pids["router"], syscall.SIGKILL)
	errc := make(chan error, 1)
	go func() { errc <- cmd.Wait() }()
	select {
	case err := <-errc:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("up exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up kept running without its router")
	}
	for name, pid := range pids {
		if alive(pid) {
			t.Fatalf("%s (%d) outlived up", name, pid)
		}
	}
}
