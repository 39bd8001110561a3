package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
	"pdsoak/server/scheduler"
)

// TestBootstrapFreezeAtRate (sglang#10110): a burst of 4 requests on a decode whose
// prealloc window holds 1. Under the bug the rooms pending past the window are never
// registered, so their prefill legs sit in the bootstrap queue until the bootstrap
// timeout fails them explicitly (a bootstrap-stage timeout, not a silent hang); without
// the bug every request completes.
func TestBootstrapFreezeAtRate(t *testing.T) {
	for _, bug := range []bool{true, false} {
		t.Run(fmt.Sprintf("bug=%v", bug), func(t *testing.T) {
			pcfg, dcfg := DefaultConfig(), DefaultConfig()
			pcfg.Semantics, dcfg.Semantics = scheduler.SemanticsSGLang, scheduler.SemanticsSGLang
			pcfg.BootstrapTimeout = 300 * time.Millisecond
			dcfg.MaxRunningRequests, dcfg.ReservedDecodeTokens = 1, 0
			if bug {
				dcfg.SGLangBugs = scheduler.BugSet{scheduler.BugBootstrapFreezeAtRate}
			}
			pd := startPD(t, newFakeBackend(64, 4), newFakeBackend(64, 4), pcfg, dcfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const n = 4
			var dchs, pchs []<-chan gen.Event
			for i := range n {
				b := &gen.Bootstrap{Room: uint64(i + 1), Addr: "prefill:8998"}
				dch, err := pd.decode.Generate(ctx, &gen.Request{ID: fmt.Sprint("d", i), Prompt: []int{0, 5}, MaxTokens: 4, Bootstrap: b})
				require.NoError(t, err)
				dchs = append(dchs, dch)
			}
			for i := range n {
				b := &gen.Bootstrap{Room: uint64(i + 1), Addr: "prefill:8998"}
				pch, err := pd.prefill.Generate(ctx, &gen.Request{ID: fmt.Sprint("p", i), Prompt: []int{0, 5}, MaxTokens: 4, Bootstrap: b})
				require.NoError(t, err)
				pchs = append(pchs, pch)
			}
			timedOut := 0
			for _, ch := range pchs {
				r := collect(t, ch)
				var se *gen.StageError
				if errors.As(r.done.Err, &se) && se.Stage == string(scheduler.StageBootstrap) && errors.Is(r.done.Err, gen.ErrTimeout) {
					timedOut++
				} else {
					require.NoError(t, r.done.Err)
				}
			}
			if bug {
				// At most the window's one room registered before the burst piled up.
				assert.GreaterOrEqual(t, timedOut, n-1, "prefill legs failed by the bootstrap timeout")
				cancel() // the router would abort the decode legs left in prealloc
			} else {
				assert.Zero(t, timedOut)
			}
			var wg sync.WaitGroup
			for _, ch := range dchs {
				wg.Go(func() { collect(t, ch) })
			}
			wg.Wait()
			// SGLang semantics refresh gauges only after forward steps: judge by live requests.
			waitFor(t, "no live request", func() bool { return pd.prefill.live.Load() == 0 && pd.decode.live.Load() == 0 })
		})
	}
}
