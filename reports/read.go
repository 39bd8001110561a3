package reports

import (
	"fmt"
	"os"

	"pdsoak/ledger"
)

// ComputeFile streams a ledger file through a Builder and returns its Results.
func ComputeFile(path string, cfg Config) (*Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reports: %w", err)
	}
	defer f.Close()
	b := NewBuilder(cfg)
	st, err := ledger.Read(f, func(e ledger.Event) error { b.Add(e); return nil })
	if err != nil {
		return nil, err
	}
	res := b.Results()
	res.timeline = b.Timeline(res)
	if st.Torn {
		res.Notes = append(res.Notes, "the ledger's last line was torn (the run was interrupted while writing); it was skipped")
	}
	return res, nil
}
