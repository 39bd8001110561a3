package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"pdsoak/ledger"
)

// prepareOut refuses an output directory that already holds a run (its events.jsonl)
// unless force, which empties it first: a second run into the same directory would
// leave the first run's forensics and append to its logs, and a report could mix them.
// A directory without a ledger is used as it is.
func prepareOut(dir string, force bool) error {
	_, err := os.Stat(filepath.Join(dir, ledger.EventsFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: --out %s: %w", dir, err)}
	case !force:
		return usageError("--out %s already holds a run (%s): choose another directory, or pass --force to empty it first", dir, ledger.EventsFile)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: --force: %w", err)}
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return &ExitError{Code: ExitInfra, Err: fmt.Errorf("harness: --force: %w", err)}
		}
	}
	return nil
}
