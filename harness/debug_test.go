package harness

import (
	"encoding/json"
	"testing"
)

func TestParseDebugRequests(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    int
		wantErr bool
	}{
		{"array", `[{"id":"a"},{"id":"b"}]`, 2, false},
		{"requests field", `{"requests":[{"id":"a"}],"count":1}`, 1, false},
		{"null requests", `{"requests":null}`, 0, false},
		{"other array field", `{"in_flight":[{"rid":"a"}]}`, 1, false},
		{"empty array", `[]`, 0, false},
		{"no list", `{"count":3}`, 0, true},
		{"not json", `<html>`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDebugRequests([]byte(tt.body))
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("got %d entries, err %v", len(got), err)
			}
		})
	}
}

func TestEntryMatchesAndDescribe(t *testing.T) {
	tests := []struct {
		entry string
		id    string
		match bool
		desc  string
	}{
		{`{"id":"agents-s001-t002","stage":"prealloc","age_seconds":12.34,"stage_age_seconds":10}`, "agents-s001-t002", true, "prealloc for 10.0s (age 12.3s)"},
		{`{"rid":"r-1-decode","stage":"transfer"}`, "r-1", true, "transfer"},
		{`{"request_id":"x"}`, "x", true, "listed"},
		{`{"id":"agents-s001-t0021"}`, "agents-s001-t002", false, ""},
		{`{"id":7}`, "7", false, ""},
		{`[1]`, "x", false, ""},
	}
	for _, tt := range tests {
		if got := entryMatches(json.RawMessage(tt.entry), tt.id); got != tt.match {
			t.Errorf("%s ~ %s: got %v", tt.entry, tt.id, got)
		}
		if tt.match {
			if got := describeEntry(json.RawMessage(tt.entry)); got != tt.desc {
				t.Errorf("describe %s = %q, want %q", tt.entry, got, tt.desc)
			}
		}
	}
}

func FuzzParseDebugRequests(f *testing.F) {
	f.Add([]byte(`{"requests":[{"id":"a","stage":"prealloc","age_seconds":1}]}`))
	f.Add([]byte(`[{"rid":"b"}]`))
	f.Add([]byte(`{"x":1,"y":[2]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := ParseDebugRequests(body)
		if err != nil {
			return
		}
		for _, e := range entries {
			entryMatches(e, "a")
			describeEntry(e)
		}
	})
}
