package judge

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "judge: debug")
				return
			}
			require.NoError(t, err)
			assert.Len(t, got, tt.want)
		})
	}
}

func TestEntryMatchesAndDescribe(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		id    string
		match bool
		desc  string
	}{
		{"stage and ages", `{"id":"agents-s001-t002","stage":"prealloc","age_seconds":12.34,"stage_age_seconds":10}`, "agents-s001-t002", true, "prealloc for 10.0s (age 12.3s)"},
		{"suffixed rid", `{"rid":"r-1-decode","stage":"transfer"}`, "r-1", true, "transfer"},
		{"request_id, no stage", `{"request_id":"x"}`, "x", true, "listed"},
		{"longer id is another request", `{"id":"agents-s001-t0021"}`, "agents-s001-t002", false, ""},
		{"numeric id", `{"id":7}`, "7", false, ""},
		{"not an object", `[1]`, "x", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.match, entryMatches(json.RawMessage(tt.entry), tt.id))
			if tt.match {
				assert.Equal(t, tt.desc, describeEntry(json.RawMessage(tt.entry)))
			}
		})
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
