package scenarios

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"pdsoak/traces"
)

// WorkloadTrace replays a public serving trace (Mooncake, Azure, BurstGPT): each
// request at the trace's own arrival time, with its prompt and output lengths.
const WorkloadTrace = "trace"

// TraceDir is the folder of the shipped trace excerpts, beside the scenarios.
const TraceDir = "traces"

// Trace configures a trace workload (workloads[].trace).
type Trace struct {
	// File is the trace, a path relative to the scenario file (shipped excerpts:
	// traces/mooncake-conversation.jsonl, traces/azure-conv.csv,
	// traces/burstgpt-synthetic.csv).
	File string `yaml:"file" json:"file"`
	// Format is mooncake, azure or burstgpt; empty: detected from the first line.
	Format string `yaml:"format" json:"format,omitempty"`
	// Speedup divides the trace's arrival times (2: twice as fast). Default 1.
	Speedup float64 `yaml:"speedup" json:"speedup,omitempty"`
	// Rate rescales arrivals to this mean rate in requests per second (instead of
	// speedup).
	Rate float64 `yaml:"rate" json:"rate,omitempty"`
	// Start skips the trace's requests before this offset into the trace.
	Start Duration `yaml:"start" json:"start,omitempty"`
	// Limit replays at most this many requests (0: all that fit the window).
	Limit int `yaml:"limit" json:"limit,omitempty"`
	// MaxTokens caps each request's max_tokens (0: the trace's output length).
	MaxTokens int `yaml:"max_tokens" json:"max_tokens,omitempty"`
	// BlockTokens is how many prompt tokens one 512-token trace block becomes
	// (default 512: the trace's own lengths); every length scales by block_tokens/512,
	// so a small reference model can replay a long-context trace's shape.
	BlockTokens int `yaml:"block_tokens" json:"block_tokens,omitempty"`

	parsed *traces.Trace // loaded by Validate
}

// Window is the trace window t selects for a workload window of length window.
func (t *Trace) Window(window time.Duration) traces.Window {
	return traces.Window{Start: t.Start.D(), Limit: t.Limit, Speedup: t.Speedup, Rate: t.Rate, Until: window}
}

// TraceSchedule returns the requests trace workload w replays in its window of length
// window, arrivals counted from the window's start. The harness, the simulator and the
// plan all count them here, so requests scheduled = requests planned.
func (sc *Scenario) TraceSchedule(w Workload, window time.Duration) ([]traces.Request, error) {
	if w.Trace == nil {
		return nil, fmt.Errorf("scenarios: workload %q has no trace", w.Name)
	}
	tr := w.Trace.parsed
	if tr == nil {
		var err error
		if tr, err = sc.LoadTrace(w.Trace); err != nil {
			return nil, err
		}
		w.Trace.parsed = tr
	}
	return tr.Window(w.Trace.Window(window)), nil
}

// LoadTrace reads and parses t's file, relative to the scenario file's folder; an
// embedded scenario reads the embedded excerpts.
func (sc *Scenario) LoadTrace(t *Trace) (*traces.Trace, error) {
	data, name, err := sc.readTrace(t.File)
	if err != nil {
		return nil, err
	}
	tr, err := traces.Parse(name, data, t.Format)
	if err != nil {
		return nil, fmt.Errorf("scenarios: %w", err)
	}
	return tr, nil
}

func (sc *Scenario) readTrace(file string) ([]byte, string, error) {
	if file == "" {
		return nil, "", errors.New("scenarios: trace file not set")
	}
	p := file
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(sc.File), file)
	}
	data, err := os.ReadFile(p)
	if err == nil {
		return data, p, nil
	}
	if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(file) {
		// An embedded scenario (or a copy of a shipped one elsewhere) finds the shipped
		// excerpts embedded, relative to the top folder or to the zoo's.
		for _, dir := range []string{".", ZooDir} {
			if data, eerr := embedded.ReadFile(path.Join(dir, filepath.ToSlash(file))); eerr == nil {
				return data, file, nil
			}
		}
	}
	return nil, p, fmt.Errorf("scenarios: read trace: %w", err)
}

// traceRequests is how many requests trace workload w sends in its window: exactly
// the schedule's length (0 when the trace cannot be read; Validate said why).
func (sc *Scenario) traceRequests(w Workload, window time.Duration) int {
	sched, err := sc.TraceSchedule(w, window)
	if err != nil {
		return 0
	}
	return len(sched)
}

// traceDefaults makes a trace workload's max_tokens its cap (what plan shows); each
// request's own comes from the trace.
func traceDefaults(w *Workload) {
	if w.Type == WorkloadTrace && w.Trace != nil && w.Trace.MaxTokens > 0 {
		w.MaxTokens = w.Trace.MaxTokens
	}
}

func describeTrace(w Workload) string {
	t := w.Trace
	if t == nil {
		return "trace"
	}
	s := "trace: " + t.File
	if t.parsed != nil {
		s += fmt.Sprintf(" (%s, %d requests)", t.parsed.Format, len(t.parsed.Requests))
	}
	switch {
	case t.Rate > 0:
		s += fmt.Sprintf(" at a mean %g req/s", t.Rate)
	case t.Speedup > 0 && t.Speedup != 1:
		s += fmt.Sprintf(" ×%g speed", t.Speedup)
	}
	if t.BlockTokens > 0 && t.BlockTokens != traces.BlockTokens {
		s += fmt.Sprintf(", %d tokens per 512-token block", t.BlockTokens)
	}
	return s
}

// TraceWorkloads names the scenario's trace workloads (their arrival curves go into
// the report).
func (sc *Scenario) TraceWorkloads() []string {
	var out []string
	for _, w := range sc.Workloads {
		if w.Type == WorkloadTrace {
			out = append(out, w.Name)
		}
	}
	return out
}
