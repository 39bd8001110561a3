package reports

// ComputeFile streams a ledger file through a Builder and returns its Results.
func ComputeFile(path string, cfg Config) (*Results, error) {
	run, err := ComputeRun(path, cfg)
	if err != nil {
		return nil, err
	}
	return run.Results, nil
}
