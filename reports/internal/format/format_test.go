package format

import "testing"

func TestWordings(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"seconds rounds to the millisecond", Seconds(1.23456), "1.235s"},
		{"micro keeps the microsecond", SecondsMicro(0.0051234), "5.123ms"},
		{"figure in seconds", Figure(0.25, "s"), "0.25 s"},
		{"never recovered", Figure(-1, "s"), "never"},
		{"figure with a unit", Figure(12.5, "req/s"), "12.5 req/s"},
		{"bare figure", Figure(3, ""), "3"},
		{"percentage", Pct(0.975), "97.5%"},
		{"one", Plural(1, "request"), "1 request"},
		{"several", Plural(3, "silent drop"), "3 silent drops"},
		{"zero", Plural(0, "request"), "0 requests"},
		{"none", OrNone(""), "(none)"},
		{"quoted", OrNone("v1"), `"v1"`},
		{"first", FirstNonEmpty("a", "b"), "a"},
		{"fallback", FirstNonEmpty("", "b"), "b"},
		{"sglang gauge", ShortMetric("sglang:num_running_reqs"), "num_running_reqs"},
		{"no prefix", ShortMetric("up"), "up"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	keys := SortedKeys(map[string]int{"b": 1, "a": 2, "c": 3})
	if len(keys) != 3 || keys[0] != "a" || keys[1] != "b" || keys[2] != "c" {
		t.Errorf("SortedKeys = %v, want [a b c]", keys)
	}
}
