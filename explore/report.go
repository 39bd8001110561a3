package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"pdsoak/reports"
)

// Report is a search's coverage (explore.json): how many runs, how they ended, each
// distinct failure signature with its count, its first run and its shrunk scenario.
type Report struct {
	Scenario    string `json:"scenario"`
	ExploreSeed int64  `json:"explore_seed"`
	// Space describes what the runs varied.
	Space string `json:"space"`
	// FaultTypes are the fault types the runs could inject.
	FaultTypes []string `json:"fault_types,omitempty"`
	Budget     Budget   `json:"budget"`
	Parallel   int      `json:"parallel"`
	Runs       int      `json:"runs"`
	Passed     int      `json:"passed"`
	Failed     int      `json:"failed"`
	Invalid    int      `json:"invalid"`
	Errors     int      `json:"errors"`
	// Elapsed is the search's wall time in seconds (shrinking not included);
	// ShrinkElapsed the shrinking's.
	Elapsed       float64 `json:"elapsed"`
	RunsPerSecond float64 `json:"runs_per_second"`
	ShrinkElapsed float64 `json:"shrink_elapsed,omitempty"`
	// Signatures are the distinct failures, in the order of their first run.
	Signatures []SignatureReport `json:"signatures"`
	// InvalidReasons and ErrorMessages count the distinct reasons of invalid runs and
	// the distinct errors of runs that could not be made.
	InvalidReasons []Count `json:"invalid_reasons,omitempty"`
	ErrorMessages  []Count `json:"errors_seen,omitempty"`
	Interrupted    bool    `json:"interrupted,omitempty"`
	// Results has every run, in index order (not in explore.json).
	Results []RunResult `json:"-"`
}

// Budget is what the search was allowed.
type Budget struct {
	Runs int    `json:"runs,omitempty"`
	Time string `json:"time,omitempty"`
}

// Count is a reason, how many runs gave it, and the first run that did.
type Count struct {
	What     string `json:"what"`
	Count    int    `json:"count"`
	FirstRun int    `json:"first_run"`
}

// SignatureReport is one distinct failure.
type SignatureReport struct {
	Signature string `json:"signature"`
	Count     int    `json:"count"`
	FirstRun  int    `json:"first_run"`
	// Seed is the scenario seed of the first run; Params all of its parameters.
	Seed   int64  `json:"seed"`
	Params Params `json:"params"`
	// RunDir holds the first run's ledger and scenario, relative to the output directory.
	RunDir string  `json:"run_dir,omitempty"`
	Shrunk *Shrunk `json:"shrunk,omitempty"`
}

// Shrunk is a failure shrunk to a minimal scenario.
type Shrunk struct {
	// File is the scenario file, relative to the output directory.
	File   string `json:"file"`
	Params Params `json:"params"`
	// Steps says what each accepted reduction changed; Runs counts every shrink run.
	Steps []string `json:"steps"`
	Runs  int      `json:"runs"`
	// Reproduced: the file, loaded with the strict loader and run again, failed with
	// the same signature. LedgerIdentical: that run's ledger is byte for byte the one
	// of the last accepted shrink step. RunDir holds that run's ledger and reports.
	Reproduced      bool   `json:"reproduced"`
	LedgerIdentical bool   `json:"ledger_identical"`
	RunDir          string `json:"run_dir,omitempty"`
	// Error says why the shrunk scenario could not be written or rerun.
	Error string `json:"error,omitempty"`
}

// report counts results (sorted by index).
func (s *searcher) report(results []RunResult) *Report {
	rep := &Report{
		Scenario: s.space.base.Name, ExploreSeed: s.opts.Seed, Space: s.space.ex.String(),
		FaultTypes: s.space.FaultTypes(), Budget: Budget{Runs: s.opts.Runs}, Parallel: s.opts.Parallel,
		Runs: len(results), Signatures: []SignatureReport{}, Results: results,
	}
	if s.opts.Time > 0 {
		rep.Budget.Time = s.opts.Time.String()
	}
	sigs := map[string]int{}
	invalid, errs := map[string]int{}, map[string]int{}
	for _, r := range results {
		switch {
		case r.Error != "":
			rep.Errors++
			rep.ErrorMessages = countReason(rep.ErrorMessages, errs, r.Error, r.Index)
		case r.Verdict == reports.VerdictPass:
			rep.Passed++
		case r.Verdict == reports.VerdictInvalid:
			rep.Invalid++
			rep.InvalidReasons = countReason(rep.InvalidReasons, invalid, r.Invalid, r.Index)
		case r.Signature != "":
			rep.Failed++
			if j, ok := sigs[r.Signature]; ok {
				rep.Signatures[j].Count++
				continue
			}
			sigs[r.Signature] = len(rep.Signatures)
			rep.Signatures = append(rep.Signatures, SignatureReport{Signature: r.Signature, Count: 1, FirstRun: r.Index, Seed: r.Seed, Params: r.params})
		}
	}
	return rep
}

// maxReasons bounds the distinct reasons listed: ten thousand distinct errors would
// say nothing more than the first few.
const maxReasons = 20

func countReason(list []Count, idx map[string]int, what string, run int) []Count {
	if j, ok := idx[what]; ok {
		list[j].Count++
		return list
	}
	if len(list) >= maxReasons {
		return list
	}
	idx[what] = len(list)
	return append(list, Count{What: what, Count: 1, FirstRun: run})
}

// WriteJSON writes the report to path (explore.json).
func WriteJSON(rep *Report, path string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("explore: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("explore: %w", err)
	}
	return nil
}

// WriteTable prints the coverage for a terminal: one line of counts, then a table of
// the failure signatures.
func WriteTable(w io.Writer, rep *Report) error {
	fmt.Fprintf(w, "explore %s (explore seed %d): %d runs in %.1fs (%.1f runs/s): %d pass, %d fail, %d invalid, %d errors\n",
		rep.Scenario, rep.ExploreSeed, rep.Runs, rep.Elapsed, rep.RunsPerSecond, rep.Passed, rep.Failed, rep.Invalid, rep.Errors)
	fmt.Fprintf(w, "varied: %s\n", rep.Space)
	if len(rep.Signatures) == 0 {
		fmt.Fprintln(w, "no failure found")
	} else {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SIGNATURE\tRUNS\tFIRST RUN\tSEED\tSHRUNK")
		for _, s := range rep.Signatures {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", s.Signature, s.Count, s.FirstRun, s.Seed, shrunkCell(s.Shrunk))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, c := range rep.InvalidReasons {
		fmt.Fprintf(w, "invalid: %d× (first run %d) %s\n", c.Count, c.FirstRun, truncate(c.What, 200))
	}
	for _, c := range rep.ErrorMessages {
		fmt.Fprintf(w, "error: %d× (first run %d) %s\n", c.Count, c.FirstRun, truncate(c.What, 200))
	}
	if rep.Interrupted {
		fmt.Fprintln(w, "interrupted: the counts cover the runs made before it")
	}
	return nil
}

func shrunkCell(s *Shrunk) string {
	switch {
	case s == nil:
		return "-"
	case s.Error != "":
		return "not written: " + truncate(s.Error, 80)
	}
	state := "reproduced"
	if !s.Reproduced {
		state = "NOT reproduced"
	} else if !s.LedgerIdentical {
		state = "reproduced, ledger differs"
	}
	return fmt.Sprintf("%s (%d steps, %d runs; %s)", s.File, len(s.Steps), s.Runs, state)
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
