package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"pdsoak/ledger"
)

// HistoryEntry is one line of a history file (harness run --history FILE): one run's
// identity, verdict and key figures. Dir is the run's output directory relative to the
// history file's directory (absolute when no relative path exists).
type HistoryEntry struct {
	Scenario string             `json:"scenario"`
	Digest   string             `json:"digest"`
	Label    string             `json:"label,omitempty"`
	Time     time.Time          `json:"time"`
	Verdict  Verdict            `json:"verdict"`
	Dir      string             `json:"dir,omitempty"`
	Figures  map[string]float64 `json:"figures"`
	// Identity is what the run ran against (mode, backend, profile, server version,
	// target.launch); the trend page marks where it changed. Absent in older lines.
	Identity *Identity `json:"identity,omitempty"`
}

// KeyFigures are the figures a history line keeps, in the trend page's order.
var KeyFigures = []string{"requests", "throughput", "silent_drops", "ok_rate", "rejected_rate",
	"ttft_p50", "ttft_p99", "itl_p99", "e2e_p50", "e2e_p99"}

// NewHistoryEntry makes a history line from a run's results. Its time is the run's start,
// or now when the ledger had none (a run that never started is still a night).
func NewHistoryEntry(r *Results, digest, label, dir string) HistoryEntry {
	at := r.Start.UTC()
	if r.Start.IsZero() {
		at = time.Now().UTC()
	}
	figs := map[string]float64{"requests": float64(r.Requests), "throughput": round(r.Throughput), "silent_drops": float64(r.SilentDrops)}
	// Only what was measured: a percentile of no samples or a rate of no requests is
	// not 0, and the trend page would plot it as a perfect night.
	if r.Requests > 0 {
		figs["ok_rate"] = round(rate(r.Outcomes[ledger.OutcomeOK], r.Requests))
		figs["rejected_rate"] = round(rate(r.Outcomes[ledger.OutcomeRejected], r.Requests))
	}
	for _, p := range []struct {
		name string
		p    Percentiles
		v    float64
	}{{"ttft_p50", r.TTFT, r.TTFT.P50}, {"ttft_p99", r.TTFT, r.TTFT.P99}, {"itl_p99", r.ITL, r.ITL.P99}, {"e2e_p50", r.E2E, r.E2E.P50}, {"e2e_p99", r.E2E, r.E2E.P99}} {
		if p.p.Count > 0 {
			figs[p.name] = p.v
		}
	}
	return HistoryEntry{Scenario: r.Scenario, Digest: digest, Label: label, Time: at, Verdict: r.Verdict, Dir: dir, Figures: figs}
}

// AppendHistory appends e to path as one JSON line. The file is opened O_APPEND and the
// line written in one write, so runs appending to one file at once do not interleave
// (a local file system appends each write whole). When the file does not end with a
// newline (a line cut short: a full disk, a writer killed mid-line), the line starts
// with one, so that it is not glued to the torn bytes and lost with them.
func AppendHistory(path string, e HistoryEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("reports: history: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("reports: history: %w", err)
	}
	if torn, err := endsTorn(f); err != nil {
		f.Close()
		return fmt.Errorf("reports: history: %w", err)
	} else if torn {
		line = append([]byte{'\n'}, line...)
	}
	_, werr := f.Write(append(line, '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("reports: history: %w", werr)
	}
	return nil
}

// endsTorn reports whether f is not empty and its last byte is not a newline.
func endsTorn(f *os.File) (bool, error) {
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return false, err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, info.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// ErrBadHistoryLine marks a history line that is not a run.
var ErrBadHistoryLine = errors.New("not a history line")

// ParseHistoryLine decodes one history line strictly: a JSON object with the scenario,
// digest, time and a known verdict; unknown fields are allowed (a newer harness may add
// some).
func ParseHistoryLine(line []byte) (HistoryEntry, error) {
	var e HistoryEntry
	if err := json.Unmarshal(line, &e); err != nil {
		return HistoryEntry{}, fmt.Errorf("reports: %w: %w", ErrBadHistoryLine, err)
	}
	switch {
	case e.Scenario == "":
		return HistoryEntry{}, fmt.Errorf("reports: %w: no scenario", ErrBadHistoryLine)
	case e.Digest == "":
		return HistoryEntry{}, fmt.Errorf("reports: %w: no digest", ErrBadHistoryLine)
	case e.Time.IsZero():
		return HistoryEntry{}, fmt.Errorf("reports: %w: no time", ErrBadHistoryLine)
	case e.Verdict != VerdictPass && e.Verdict != VerdictFail && e.Verdict != VerdictInvalid:
		return HistoryEntry{}, fmt.Errorf("reports: %w: verdict %q", ErrBadHistoryLine, e.Verdict)
	}
	return e, nil
}

// HistoryProblem is a malformed history line, skipped.
type HistoryProblem struct {
	Line int
	Err  error
}

func (p HistoryProblem) String() string { return fmt.Sprintf("line %d: %v", p.Line, p.Err) }

// ReadHistory reads a history file. A malformed line (a torn write, a hand edit) is
// skipped and reported with its 1-based line number: one bad night must not hide the
// others. Blank lines are ignored. The error is only for a failed read.
func ReadHistory(r io.Reader) ([]HistoryEntry, []HistoryProblem, error) {
	var out []HistoryEntry
	var problems []HistoryProblem
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			e, perr := ParseHistoryLine(bytes.TrimSpace(line))
			if perr != nil {
				problems = append(problems, HistoryProblem{Line: n, Err: perr})
			} else {
				out = append(out, e)
			}
		}
		if err == io.EOF {
			return out, problems, nil
		}
		if err != nil {
			return out, problems, fmt.Errorf("reports: history: %w", err)
		}
	}
}
