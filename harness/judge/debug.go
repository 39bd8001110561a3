package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// DebugReport is what the target's /debug/requests endpoints said about one request
// when the harness noticed it was silently dropped. It is stored as the done event's
// server_debug field.
type DebugReport struct {
	// Where summarises the findings, e.g. "decode-0: prealloc (age 12.3s)"; "not found"
	// when no process listed the request.
	Where   string           `json:"where"`
	Sources []DebugSourceHit `json:"sources"`
}

// DebugSourceHit is one process's answer.
type DebugSourceHit struct {
	Process string            `json:"process"`
	URL     string            `json:"url"`
	Found   bool              `json:"found"`
	Entries []json.RawMessage `json:"entries,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// DebugSource is one process's /debug/requests answer: its entries, or the error that
// stood in for them.
type DebugSource struct {
	Process, URL string
	Entries      []json.RawMessage
	Err          error
}

// DebugReportFor builds the server_debug JSON of a silent drop of request id from the
// sources' answers, as the runner records it (the simulator uses it too).
func DebugReportFor(id string, srcs []DebugSource) json.RawMessage {
	rep := DebugReport{}
	var where []string
	for _, s := range srcs {
		hit := DebugSourceHit{Process: s.Process, URL: s.URL}
		if s.Err != nil {
			hit.Error = s.Err.Error()
		}
		for _, e := range s.Entries {
			if entryMatches(e, id) {
				hit.Found = true
				hit.Entries = append(hit.Entries, e)
				where = append(where, s.Process+": "+describeEntry(e))
			}
		}
		rep.Sources = append(rep.Sources, hit)
	}
	rep.Where = "not found"
	if len(where) > 0 {
		rep.Where = strings.Join(where, "; ")
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return nil
	}
	return b
}

// ParseDebugRequests extracts the list of request entries from a /debug/requests body.
func ParseDebugRequests(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var arr []json.RawMessage
	if err := json.Unmarshal(body, &arr); err == nil {
		return arr, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("judge: debug body is neither a list nor an object: %w", err)
	}
	if v, ok := obj["requests"]; ok {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, nil
		}
		if err := json.Unmarshal(v, &arr); err != nil {
			return nil, fmt.Errorf("judge: debug requests field: %w", err)
		}
		return arr, nil
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if json.Unmarshal(obj[k], &arr) == nil {
			return arr, nil
		}
	}
	return nil, errors.New("judge: debug body has no request list")
}

// entryMatches reports whether a debug entry is about request id (the id the harness
// sent as X-Request-ID; servers may suffix it for their PD legs).
// MatchesID reports whether a debug entry's id s is about request id: the id itself, or
// one of its legs (id-…, id:…).
func MatchesID(s, id string) bool {
	return s == id || strings.HasPrefix(s, id+"-") || strings.HasPrefix(s, id+":")
}

func entryMatches(e json.RawMessage, id string) bool {
	var m map[string]any
	if json.Unmarshal(e, &m) != nil {
		return false
	}
	for _, k := range []string{"id", "rid", "request_id", "x_request_id"} {
		if s, ok := m[k].(string); ok && MatchesID(s, id) {
			return true
		}
	}
	return false
}

func describeEntry(e json.RawMessage) string {
	var m struct {
		Stage    string   `json:"stage"`
		Age      *float64 `json:"age_seconds"`
		StageAge *float64 `json:"stage_age_seconds"`
	}
	_ = json.Unmarshal(e, &m)
	s := m.Stage
	if s == "" {
		s = "listed"
	}
	if m.StageAge != nil {
		s += fmt.Sprintf(" for %.1fs", *m.StageAge)
	}
	if m.Age != nil {
		s += fmt.Sprintf(" (age %.1fs)", *m.Age)
	}
	return s
}
