package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/kernels"
	"pdsoak/server/gen"
	"pdsoak/sse"
)

// workerLeg posts a gen.WorkerRequest to /generate and collects the stream.
func workerLeg(t *testing.T, ctx context.Context, url string, wr gen.WorkerRequest) ([]int, gen.WorkerChunk, int, error) {
	t.Helper()
	body, _ := json.Marshal(wr)
	st, _, b, err := rawPost(t, ctx, url+"/generate", string(body))
	if err != nil || st != 200 {
		return nil, gen.WorkerChunk{}, st, fmt.Errorf("status %d err %v body %s", st, err, b)
	}
	var toks []int
	var last gen.WorkerChunk
	events, err := sse.ReadData(strings.NewReader(string(b)))
	if err != nil {
		return nil, last, st, fmt.Errorf("stream %q: %w", b, err)
	}
	for _, ev := range events {
		var c gen.WorkerChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			return nil, last, st, fmt.Errorf("chunk %q: %v", ev, err)
		}
		toks = append(toks, c.TokenIDs...)
		last = c
	}
	if !last.Done {
		return toks, last, st, fmt.Errorf("stream ended without done: %s", b)
	}
	return toks, last, st, nil
}

// bootstrapAddr reads a prefill worker's bootstrap address from /server_info.
func bootstrapAddr(t *testing.T, w *testWorker) string {
	t.Helper()
	_, body := getText(t, w.url+"/server_info")
	var info struct {
		BootstrapAddr string `json:"bootstrap_addr"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.BootstrapAddr == "" {
		t.Fatalf("server_info without bootstrap_addr: %s", body)
	}
	return info.BootstrapAddr
}

// TestPDLegsMatchColocated drives a prefill and a decode worker the way the router does
// (both legs at once, same room) and checks the greedy tokens equal a colocated worker's.
func TestPDLegsMatchColocated(t *testing.T) {
	col := startWorker(t, roleColocated, "--seed", "3")
	pre := startWorker(t, rolePrefill, "--seed", "3")
	dec := startWorker(t, roleDecode, "--seed", "3")
	addr := bootstrapAddr(t, pre)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	prompts := []string{"The river runs", "Nobody is in a hurry here.", strings.Repeat("bees and goats ", 20)}
	// Prompts of 15, 16, 17, 31, 32 and 33 tokens (BOS included): page boundaries of 16.
	for _, n := range []int{14, 15, 16, 30, 31, 32} {
		prompts = append(prompts, strings.Repeat("a", n))
	}
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func(i int, p string) {
			defer wg.Done()
			ids := kernels.Tokenizer{}.EncodeWithBOS(p)
			sp := gen.WorkerSampling{MaxNewTokens: 24, IgnoreEOS: true}
			want, wantDone, _, err := workerLeg(t, ctx, col.url, gen.WorkerRequest{RID: fmt.Sprintf("col-%d", i), InputIDs: ids, SamplingParams: sp})
			if err != nil {
				t.Errorf("colocated: %v", err)
				return
			}
			room := uint64(1000 + i)
			legReq := gen.WorkerRequest{RID: fmt.Sprintf("pd-%d", i), InputIDs: ids, SamplingParams: sp, BootstrapRoom: &room, BootstrapAddr: addr}
			var pdone gen.WorkerChunk
			var perr error
			var lw sync.WaitGroup
			lw.Add(1)
			go func() {
				defer lw.Done()
				_, pdone, _, perr = workerLeg(t, ctx, pre.url, legReq)
			}()
			got, done, _, err := workerLeg(t, ctx, dec.url, legReq)
			lw.Wait()
			if err != nil || perr != nil {
				t.Errorf("prompt %d: decode %v, prefill %v", i, err, perr)
				return
			}
			if pdone.Error != nil || done.Error != nil {
				t.Errorf("prompt %d: leg errors prefill %+v decode %+v", i, pdone.Error, done.Error)
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(want) || done.Finish != wantDone.Finish {
				t.Errorf("prompt %d: PD tokens %v (%s) differ from colocated %v (%s)", i, got, done.Finish, want, wantDone.Finish)
			}
		}(i, p)
	}
	wg.Wait()
}

// TestDecodeLegFailsWhenPrefillIsUnreachable: the transfer cannot start, so decode must
// answer with an explicit kv_transfer_failed error, not hang.
func TestDecodeLegFailsWhenPrefillIsUnreachable(t *testing.T) {
	dec := startWorker(t, roleDecode, "--transfer-timeout", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	room := uint64(77)
	body, _ := json.Marshal(gen.WorkerRequest{RID: "lost", InputIDs: kernels.Tokenizer{}.EncodeWithBOS("hello"),
		SamplingParams: gen.WorkerSampling{MaxNewTokens: 4}, BootstrapRoom: &room, BootstrapAddr: "127.0.0.1:1"})
	st, _, b, err := rawPost(t, ctx, dec.url+"/generate", string(body))
	require.NoError(t, err)
	var er struct {
		Error struct{ Type string } `json:"error"`
	}
	if st == 200 {
		// The failure may also arrive as the final chunk of a started stream.
		if !strings.Contains(string(b), `"kind":"kv_transfer_failed"`) && !strings.Contains(string(b), `"kind":"timeout"`) {
			t.Fatalf("200 without a transfer error: %s", b)
		}
	} else if json.Unmarshal(b, &er) != nil || (er.Error.Type != "kv_transfer_failed" && er.Error.Type != "timeout") {
		t.Fatalf("status %d body %s", st, b)
	}
	waitIdle(t, dec)
}

// waitIdle waits (bounded) until a worker has no request in flight and no KV in use.
func waitIdle(t *testing.T, w *testWorker) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound a loaded machine keeps
	for {
		_, dbg := getText(t, w.url+"/debug/requests")
		_, m := getText(t, w.url+"/metrics")
		usage, _ := gauge(m, "sglang:token_usage")
		running, _ := gauge(m, "sglang:num_running_reqs")
		if strings.Contains(dbg, `"count":0`) && usage == 0 && running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not idle: token_usage %v running %v, %s", usage, running, dbg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientDisconnectFreesBothLegs (I6): cancelling the legs mid-stream frees the
// request on decode and prefill.
func TestClientDisconnectFreesBothLegs(t *testing.T) {
	pre := startWorker(t, rolePrefill, "--backend", "paced")
	dec := startWorker(t, roleDecode, "--backend", "paced")
	addr := bootstrapAddr(t, pre)
	room := uint64(4242)
	wr := gen.WorkerRequest{RID: "bye", InputIDs: kernels.Tokenizer{}.EncodeWithBOS("a long walk home"),
		SamplingParams: gen.WorkerSampling{MaxNewTokens: 4000, IgnoreEOS: true}, BootstrapRoom: &room, BootstrapAddr: addr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range []*testWorker{pre, dec} {
		wg.Add(1)
		go func(url string) {
			defer wg.Done()
			_, _, _, _ = workerLeg(t, ctx, url, wr)
		}(w.url)
	}
	// Wait until decode is generating, then go away.
	deadline := time.Now().Add(time.Minute) // a bound a loaded machine keeps
	for {
		_, dbg := getText(t, dec.url+"/debug/requests")
		if strings.Contains(dbg, `"stage":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decode never started running: %s", dbg)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	waitIdle(t, dec)
	waitIdle(t, pre)
}
