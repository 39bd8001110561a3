package gatecal

import (
	"encoding/json"
	"fmt"
	"os"

	"pdsoak/reports"
)

// Save writes the report as JSON (the pairs' rows keep every interval, so the figures
// can be recomputed under other floors without running again).
func (r *Report) Save(path string) error {
	data, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("gatecal: save: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("gatecal: save: %w", err)
	}
	return nil
}

// Load reads a saved report and re-judges it with compare's current default floors.
func Load(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gatecal: load: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("gatecal: load %s: %w", path, err)
	}
	var o reports.CompareOptions
	r.Floors = o.EffectiveFloors()
	return &r, nil
}
