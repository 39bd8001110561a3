package scenarios

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("5s", "1m30s", "250ms").
// A bare 0 is accepted.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Seconds returns the duration in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

func (d Duration) String() string { return time.Duration(d).String() }

// MaxDuration bounds every duration of a scenario: a year is beyond any soak, and a
// sum of a few stays far from time.Duration's overflow at 292 years.
const MaxDuration = Duration(365 * 24 * time.Hour)

// ParseDuration parses a Go duration string; "0" is accepted without a unit. A
// duration beyond MaxDuration (either sign) is an error.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("scenarios: invalid duration %q (want e.g. 5s, 1m30s, 250ms)", s)
	}
	if v > MaxDuration.D() || v < -MaxDuration.D() {
		return 0, fmt.Errorf("scenarios: duration %q is more than a year (8760h)", s)
	}
	return Duration(v), nil
}

// UnmarshalYAML decodes a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("scenarios: line %d: duration must be a string like 5s", n.Line)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("scenarios: duration must be a string: %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
