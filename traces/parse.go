package traces

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// maxTokens bounds one request's token counts (a guard against garbage, not a model limit).
const maxTokens = 1 << 24

type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

func parseMooncake(file string, data []byte) ([]Request, error) {
	var out []Request
	n := 0
	for line := range bytes.Lines(data) {
		n++
		l := bytes.TrimSpace(line)
		if n == 1 {
			l = bytes.TrimPrefix(l, []byte("\xef\xbb\xbf"))
		}
		if len(l) == 0 {
			continue
		}
		if len(out) >= MaxRequests {
			return nil, &Error{File: file, Line: n, Msg: fmt.Sprintf("more than %d requests", MaxRequests)}
		}
		var m mooncakeLine
		dec := json.NewDecoder(bytes.NewReader(l))
		// A misspelt key (hash_id) would silently drop what it carries.
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				return nil, &Error{File: file, Line: n, Field: strings.Trim(key, `"`),
					Msg: "unknown field (want timestamp, input_length, output_length, hash_ids)"}
			}
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, &Error{File: file, Line: n, Field: te.Field, Msg: typeMsg(te)}
			}
			return nil, &Error{File: file, Line: n, Msg: "not a JSON object: " + err.Error()}
		}
		if dec.More() {
			return nil, &Error{File: file, Line: n, Msg: "more than one JSON value on the line"}
		}
		switch {
		case m.Timestamp == nil:
			return nil, &Error{File: file, Line: n, Field: "timestamp", Msg: "missing"}
		case m.InputLength == nil:
			return nil, &Error{File: file, Line: n, Field: "input_length", Msg: "missing"}
		case m.OutputLength == nil:
			return nil, &Error{File: file, Line: n, Field: "output_length", Msg: "missing"}
		}
		at, err := msDuration(*m.Timestamp)
		if err != nil {
			return nil, &Error{File: file, Line: n, Field: "timestamp", Msg: err.Error()}
		}
		r := Request{At: at, Input: *m.InputLength, Output: *m.OutputLength, Line: n}
		if err := checkTokens(file, n, "input_length", r.Input); err != nil {
			return nil, err
		}
		if err := checkTokens(file, n, "output_length", r.Output); err != nil {
			return nil, err
		}
		want := (r.Input + BlockTokens - 1) / BlockTokens
		if len(m.HashIDs) == 0 {
			r.Blocks = uniqueBlocks(n, r.Input)
		} else {
			// The published traces give ceil(input/512) ids; more would describe tokens
			// the prompt does not have.
			if len(m.HashIDs) > max(want, 1) {
				return nil, &Error{File: file, Line: n, Field: "hash_ids",
					Msg: fmt.Sprintf("%d blocks for %d input tokens (at most %d of %d tokens)", len(m.HashIDs), r.Input, max(want, 1), BlockTokens)}
			}
			r.Blocks = make([]uint64, len(m.HashIDs))
			for i, h := range m.HashIDs {
				if h < 0 {
					return nil, &Error{File: file, Line: n, Field: "hash_ids", Msg: fmt.Sprintf("negative id %d", h)}
				}
				r.Blocks[i] = uint64(h)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// typeMsg says what a Mooncake field wants, in JSON's words rather than Go's.
func typeMsg(te *json.UnmarshalTypeError) string {
	want := "a number"
	switch te.Type.Kind() {
	case reflect.Int, reflect.Int64:
		want = "a whole number"
	case reflect.Slice:
		want = "a list of block ids"
	}
	got := "a JSON " + te.Value
	if v, ok := strings.CutPrefix(te.Value, "number "); ok {
		got = v
	}
	return "must be " + want + ", got " + got
}

func msDuration(ms float64) (time.Duration, error) {
	if math.IsNaN(ms) || ms < 0 || ms > float64(365*24*time.Hour/time.Millisecond) {
		return 0, fmt.Errorf("must be a number of milliseconds in [0, 1 year], got %v", ms)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

func checkTokens(file string, line int, field string, v int) error {
	if v < 0 || v > maxTokens {
		return &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf("must be in [0, %d], got %d", maxTokens, v)}
	}
	return nil
}

// csvRows reads a CSV with a header whose leading columns are want (case-insensitive),
// calling row with each record's 1-based line.
func csvRows(file string, data []byte, want []string, row func(line int, rec []string) error) error {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return &Error{File: file, Line: 1, Msg: "no CSV header: " + errMsg(err)}
	}
	if len(head) < len(want) {
		return &Error{File: file, Line: 1, Msg: fmt.Sprintf("header has %d columns, want %s", len(head), strings.Join(want, ","))}
	}
	for i, w := range want {
		if !strings.EqualFold(strings.TrimSpace(head[i]), w) {
			return &Error{File: file, Line: 1, Msg: fmt.Sprintf("column %d is %q, want %q", i+1, head[i], w)}
		}
	}
	rows := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			line := 0
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				line = pe.Line
			}
			return &Error{File: file, Line: line, Msg: "bad CSV: " + errMsg(err)}
		}
		line, _ := r.FieldPos(0) // only valid after a successful Read
		if len(rec) < len(want) {
			return &Error{File: file, Line: line, Msg: fmt.Sprintf("%d columns, want %d", len(rec), len(want))}
		}
		if rows++; rows > MaxRequests {
			return &Error{File: file, Line: line, Msg: fmt.Sprintf("more than %d requests", MaxRequests)}
		}
		if err := row(line, rec); err != nil {
			return err
		}
	}
}

func errMsg(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func tokenField(file string, line int, field, s string) (int, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.Atoi(s)
	if err != nil {
		// BurstGPT writes some counts as floats ("12.0").
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > maxTokens {
			return 0, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf("not a token count: %q", s)}
		}
		v = int(f)
	}
	return v, checkTokens(file, line, field, v)
}

// azureLayouts are the timestamp forms of the 2023 and 2024 Azure LLM traces.
var azureLayouts = []string{"2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05.999999999-07:00", "2006-01-02T15:04:05.999999999Z07:00"}

func parseAzure(file string, data []byte) ([]Request, error) {
	var out []Request
	var t0 time.Time
	err := csvRows(file, data, []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"}, func(line int, rec []string) error {
		s := strings.TrimSpace(rec[0])
		var ts time.Time
		var err error
		for _, layout := range azureLayouts {
			if ts, err = time.Parse(layout, s); err == nil {
				break
			}
		}
		if err != nil {
			return &Error{File: file, Line: line, Field: "TIMESTAMP", Msg: fmt.Sprintf("not a timestamp like 2023-11-16 18:15:46.6805900: %q", s)}
		}
		if len(out) == 0 {
			t0 = ts
		}
		at := ts.Sub(t0)
		if at < -365*24*time.Hour || at > 365*24*time.Hour {
			return &Error{File: file, Line: line, Field: "TIMESTAMP", Msg: "more than a year from the first request"}
		}
		in, err := tokenField(file, line, "ContextTokens", rec[1])
		if err != nil {
			return err
		}
		outTok, err := tokenField(file, line, "GeneratedTokens", rec[2])
		if err != nil {
			return err
		}
		out = append(out, Request{At: at, Input: in, Output: outTok, Blocks: uniqueBlocks(line, in), Line: line})
		return nil
	})
	return out, err
}

func parseBurstGPT(file string, data []byte) ([]Request, error) {
	var out []Request
	err := csvRows(file, data, []string{"Timestamp", "Model", "Request tokens", "Response tokens"}, func(line int, rec []string) error {
		s := strings.TrimSpace(rec[0])
		secs, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return &Error{File: file, Line: line, Field: "Timestamp", Msg: fmt.Sprintf("not a number of seconds: %q", s)}
		}
		at, err := msDuration(secs * 1000)
		if err != nil {
			return &Error{File: file, Line: line, Field: "Timestamp", Msg: err.Error()}
		}
		in, err := tokenField(file, line, "Request tokens", rec[2])
		if err != nil {
			return err
		}
		outTok, err := tokenField(file, line, "Response tokens", rec[3])
		if err != nil {
			return err
		}
		out = append(out, Request{At: at, Input: in, Output: outTok, Blocks: uniqueBlocks(line, in), Line: line})
		return nil
	})
	return out, err
}
