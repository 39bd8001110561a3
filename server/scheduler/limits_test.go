package scheduler

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Limits)
		want   []string // one message per problem, in order; none: valid
	}{
		{"defaults", func(*Limits) {}, nil},
		{"sglang with every timeout off", func(l *Limits) {
			l.Semantics = SemanticsSGLang
			l.WatchdogTimeout, l.RequestTimeout = -1, -time.Second
		}, nil},
		{"semantics", func(l *Limits) { l.Semantics = "loose" }, []string{`--semantics "loose" is unknown (strict, sglang)`}},
		{"max queued", func(l *Limits) { l.MaxQueuedRequests = -1 }, []string{"--max-queued-requests must be >= 0 (got -1)"}},
		{"max running", func(l *Limits) { l.MaxRunningRequests = 0 }, []string{"--max-running-requests must be > 0 (got 0)"}},
		{"cuda graph", func(l *Limits) { l.CudaGraphMaxBS = -2 }, []string{"--cuda-graph-max-bs must be >= 0 (got -2)"}},
		{"context length", func(l *Limits) { l.ContextLength = 1 }, []string{"--context-length must be > 1 (got 1)"}},
		{"max prefill", func(l *Limits) { l.MaxPrefillTokens = 0 }, []string{"--max-prefill-tokens must be > 0 (got 0)"}},
		{"chunked prefill", func(l *Limits) { l.ChunkedPrefillSize = -1 }, []string{"--chunked-prefill-size must be >= 0 (got -1)"}},
		{"page size", func(l *Limits) { l.PageSize = 5000 }, []string{"--page-size must be in [0, 4096] (got 5000)"}},
		{"max total tokens", func(l *Limits) { l.MaxTotalTokens = -1 }, []string{"--max-total-tokens must be >= 0 (got -1)"}},
		{"max total below a page", func(l *Limits) { l.MaxTotalTokens, l.PageSize = 3, 16 },
			[]string{"--max-total-tokens 3 is less than one page of 16 tokens (--page-size)"}},
		{"mem fraction zero", func(l *Limits) { l.MemFractionStatic = 0 }, []string{"--mem-fraction-static must be in (0, 1] (got 0)"}},
		{"mem fraction above one", func(l *Limits) { l.MemFractionStatic = 1.5 }, []string{"--mem-fraction-static must be in (0, 1] (got 1.5)"}},
		{"device memory NaN", func(l *Limits) { l.DeviceMemoryGB = math.NaN() }, []string{"--device-memory-gb must be a finite number >= 0 (got NaN)"}},
		{"retry after", func(l *Limits) { l.RetryAfter = -time.Second }, []string{"--retry-after must be >= 0 (got -1s)"}},
		{"reserved decode tokens", func(l *Limits) { l.ReservedDecodeTokens = -1 }, []string{"SGLANG_NUM_RESERVED_DECODE_TOKENS must be >= 0 (got -1)"}},
		{"decode log interval", func(l *Limits) { l.DecodeLogInterval = -1 }, []string{"--decode-log-interval must be >= 0 (got -1)"}},
		{"every problem at once", func(l *Limits) { l.MaxRunningRequests, l.ContextLength, l.Semantics = 0, 0, "" }, []string{
			`--semantics "" is unknown (strict, sglang)`, "--max-running-requests must be > 0 (got 0)", "--context-length must be > 1 (got 0)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			tc.mutate(&l)
			err := l.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var le *LimitError
				require.True(t, errors.As(e, &le), "%v is not a *LimitError", e)
				got = append(got, le.Flag+" "+le.Problem)
				assert.Equal(t, "scheduler: "+le.Flag+" "+le.Problem, e.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLimitsBounds(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Limits)
		want   Bounds
	}{
		{"strict defaults", func(*Limits) {}, Bounds{Bootstrap: 30 * time.Second, Prealloc: 30 * time.Second,
			Transfer: 15 * time.Second, Waiting: 60 * time.Second, Request: 300 * time.Second, Watchdog: 30 * time.Second}},
		{"strict, set and off", func(l *Limits) {
			l.WaitingTimeout, l.WatchdogTimeout, l.RunningTimeout = 5*time.Second, -1, 7*time.Second
		},
			Bounds{Bootstrap: 30 * time.Second, Prealloc: 30 * time.Second, Transfer: 15 * time.Second,
				Waiting: 5 * time.Second, Running: 7 * time.Second, Request: 300 * time.Second}},
		{"sglang defaults", func(l *Limits) { l.Semantics = SemanticsSGLang }, Bounds{Bootstrap: 300 * time.Second, Watchdog: 300 * time.Second}},
		{"sglang ignores prealloc and transfer", func(l *Limits) {
			l.Semantics, l.PreallocTimeout, l.TransferTimeout, l.WaitingTimeout = SemanticsSGLang, time.Second, time.Second, time.Second
		}, Bounds{Bootstrap: 300 * time.Second, Waiting: time.Second, Watchdog: 300 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := DefaultLimits()
			tc.mutate(&l)
			assert.Equal(t, tc.want, l.Bounds())
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // a substring of the error; "": valid
	}{
		{"test config", func(*Config) {}, ""},
		{"role", func(c *Config) { c.Role = "router" }, `role "router" is unknown`},
		{"semantics", func(c *Config) { c.Semantics = "lax" }, "--semantics"},
		{"pages", func(c *Config) { c.Pages = 0 }, "pages must be > 0"},
		{"unresolved page size", func(c *Config) { c.PageSize = 0 }, "page size must be resolved"},
		{"eos", func(c *Config) { c.EOS = c.VocabSize }, "out of range"},
		{"running", func(c *Config) { c.MaxRunningRequests = 0 }, "--max-running-requests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.mutate(&c)
			_, err := New(c)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
