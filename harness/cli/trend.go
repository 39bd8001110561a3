package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"pdsoak/reports"
	"pdsoak/reports/render"
)

// historyFlags are run's and report's --history and --label.
type historyFlags struct {
	file, label string
}

func (h *historyFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&h.file, "history", "", "append one JSON line about this run (scenario, digest, label, time, verdict, key figures, output directory) to this file, for harness trend")
	cmd.Flags().StringVar(&h.label, "label", "", "a label for the --history line, such as a commit id")
}

// record appends the run's history line; the output directory is stored relative to the
// history file's directory so that the trend page can link its report.
func (h *historyFlags) record(outDir string, res *reports.Results) error {
	if h.file == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(outDir, ResolvedFile))
	if err != nil {
		return fmt.Errorf("harness: history: %w", err)
	}
	digest, err := reports.ScenarioDigest(data)
	if err != nil {
		return fmt.Errorf("harness: history: %w", err)
	}
	dir, err := relTo(filepath.Dir(h.file), outDir)
	if err != nil {
		return fmt.Errorf("harness: history: %w", err)
	}
	e := reports.NewHistoryEntry(res, digest, h.label, dir)
	if id, err := reports.IdentityOf(res, data); err == nil {
		e.Identity = &id // the trend page marks where it changed
	}
	return reports.AppendHistory(h.file, e)
}

// relTo is target relative to base, both made absolute first.
func relTo(base, target string) (string, error) {
	ab, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	at, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	return filepath.Rel(ab, at)
}

func (a *app) trendCommand() *cobra.Command {
	var outDir string
	cmd := &cobra.Command{
		Use:   "trend HISTORY",
		Short: "Write a static page (OUT/index.html) of each scenario's key figures across the runs in a --history file",
		Long: `trend reads a history file written by harness run --history (one JSON line per run) and
writes OUT/index.html: per scenario, a chart of each key figure across its runs (runs that did
not pass are marked), and a table linking each run's report.html where it can be reached by
a relative path from OUT. The page needs no network. A malformed line is reported with its
line number on stderr and on the page, and skipped.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("trend needs exactly one HISTORY file, got %s", plural(len(args), "argument", "arguments"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return usageError("%v", err)
			}
			entries, problems, err := reports.ReadHistory(f)
			f.Close()
			if err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			for _, p := range problems {
				fmt.Fprintf(cmd.ErrOrStderr(), "harness: %s:%d: %v (skipped)\n", args[0], p.Line, p.Err)
			}
			if outDir == "" {
				return usageError("trend needs --out DIR")
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
			}
			histDir := filepath.Dir(args[0])
			link := func(e reports.HistoryEntry) string {
				if e.Dir == "" {
					return ""
				}
				report := filepath.Join(e.Dir, reports.HTMLFile)
				if !filepath.IsAbs(report) {
					report = filepath.Join(histDir, report)
				}
				if _, err := os.Stat(report); err != nil {
					return ""
				}
				rel, err := relTo(outDir, report)
				if err != nil {
					return ""
				}
				return filepath.ToSlash(rel)
			}
			var buf bytes.Buffer
			if err := render.WriteTrend(&buf, entries, problems, link); err != nil {
				return &ExitError{Code: ExitInfra, Err: err}
			}
			page := filepath.Join(outDir, reports.TrendFile)
			if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
				return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: %w", err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s, %s skipped)\n", page, plural(len(entries), "run", "runs"), plural(len(problems), "line", "lines"))
			return nil
		},
	}
	cmd.Flags().StringVar(&outDir, "out", "", "directory for index.html (required)")
	return cmd
}
