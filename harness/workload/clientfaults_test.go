package workload

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/chaos"
	"pdsoak/scenarios"
)

// TestClientFaults: what each client-side fault asks the driver for — a burst's extra
// requests, a disconnect's own self-cancelling streams, or the rule on the workloads'
// own streams, cleared by Stop — with one numbering of the extra series.
func TestClientFaults(t *testing.T) {
	sc := &scenarios.Scenario{Seed: 7, Workloads: []scenarios.Workload{{Name: "agents", Type: "agents", PromptTokens: 8}}}
	sc.Target.Model = "m"
	var got []string
	seq := 0
	f := ClientFaults{Scenario: sc, Seq: func() int { seq++; return seq },
		SendMany: func(_ context.Context, c *Common, n, conc, cancelAfter int) chaos.Run {
			r := NewExtras(c, n, conc, cancelAfter, time.Unix(0, 0)).Next()
			got = append(got, fmt.Sprintf("send %s n=%d conc=%d cancel=%d stream=%v", r.ID, n, conc, cancelAfter, r.Stream))
			return chaos.FuncRun{}
		},
		SetDisconnect: func(target string, after int, fraction float64, st *chaos.LiveStats) {
			got = append(got, fmt.Sprintf("rule %s after=%d fraction=%g stats=%v", target, after, fraction, st != nil))
		}}
	env := &chaos.FuncEnv{}
	f.Fill(env)
	ctx := context.Background()
	_, err := env.Load(ctx, "agents", chaos.Burst{Requests: 12, Concurrency: 3})
	require.NoError(t, err)
	_, err = env.Disconnect(ctx, "agents", chaos.Disconnect{AfterTokens: 2, Requests: 5})
	require.NoError(t, err)
	run, err := env.Disconnect(ctx, "agents", chaos.Disconnect{Fraction: 0.5})
	require.NoError(t, err)
	run.Stop()
	assert.Equal(t, []string{
		"send agents-burst1-000000 n=12 conc=3 cancel=0 stream=false",
		"send agents-abort2-000000 n=5 conc=0 cancel=2 stream=true",
		"rule agents after=1 fraction=0.5 stats=true",
		"rule agents after=0 fraction=0 stats=false",
	}, got)
}
