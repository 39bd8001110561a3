package client

import (
	"encoding/json"
	"pdsoak/internal/http1"
	"unicode/utf8"
)

// decodeChunk decodes one SSE chunk (or a whole body) into ch exactly as
// json.Unmarshal(data, ch) does. It runs once per token of every stream, and
// encoding/json's reflection was the largest cost of a held stream's token (issue 11's
// profile), so the common shape is decoded by hand: an object whose known keys are
// spelled exactly, plain strings (valid UTF-8, no escapes) and plain integers. Anything
// else (escapes, case-folded or duplicate keys, a wrong type, deep nesting, invalid
// JSON) falls back to json.Unmarshal on a fresh chunk, so every answer and every error
// is encoding/json's own.
func decodeChunk(data string, ch *chunk) error {
	*ch = chunk{}
	d := chunkDecoder{s: data}
	if d.top(ch) {
		return nil
	}
	return unmarshalChunk(data, ch)
}

// unmarshalChunk is the fallback, through a chunk of its own: handing ch itself to
// encoding/json would move every stream's chunk to the heap, held while it waits.
func unmarshalChunk(data string, ch *chunk) error {
	tmp := new(chunk)
	err := json.Unmarshal([]byte(data), tmp)
	*ch = *tmp
	return err
}

// chunkDecoder is a cursor over one JSON text; every method returns false to mean "not
// the simple shape: fall back".
type chunkDecoder struct {
	s string
	i int
}

func (d *chunkDecoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (d *chunkDecoder) peek() byte {
	d.ws()
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

func (d *chunkDecoder) lit(l string) bool {
	if len(d.s)-d.i >= len(l) && d.s[d.i:d.i+len(l)] == l {
		d.i += len(l)
		return true
	}
	return false
}

// str reads a string without escapes, valid UTF-8, no control characters.
func (d *chunkDecoder) str() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			v := d.s[start:j]
			if !ascii && !utf8.ValidString(v) {
				return "", false
			}
			d.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
	}
	return "", false
}

// nullableStr reads a string or null (null leaves "", as encoding/json does).
func (d *chunkDecoder) nullableStr() (string, bool) {
	if d.peek() == 'n' {
		return "", d.lit("null")
	}
	return d.str()
}

// integer reads -?(0|[1-9][0-9]*) that fits an int without question.
func (d *chunkDecoder) integer() (int, bool) {
	d.ws()
	neg := d.lit("-")
	start := d.i
	n := 0
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		n = n*10 + int(d.s[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || digits > 15 || (digits > 1 && d.s[start] == '0') {
		return 0, false
	}
	if d.i < len(d.s) {
		switch d.s[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}

// object walks an object, calling field for each key (value still unread); field
// consumes the value or returns false.
func (d *chunkDecoder) object(field func(key string) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		key, ok := d.str()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !field(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// known reports whether key is one of names; a key that matches one only when case is
// ignored sends the decoder to encoding/json, which matches keys that way.
func known(key string, names ...string) (string, bool) {
	for _, n := range names {
		if key == n {
			return n, true
		}
	}
	for _, n := range names {
		if len(key) == len(n) && http1.EqualFold([]byte(key), n) {
			return "", false
		}
	}
	return "", true
}

// skip reads any value of the simple shape (strings without escapes, numbers, literals,
// nested arrays and objects) and returns its text.
func (d *chunkDecoder) skip(depth int) (string, bool) {
	if depth > 64 {
		return "", false
	}
	start := d.i
	switch c := d.peek(); {
	case c == '"':
		if _, ok := d.str(); !ok {
			return "", false
		}
	case c == '{':
		if !d.object(func(string) bool { _, ok := d.skip(depth + 1); return ok }) {
			return "", false
		}
	case c == '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			break
		}
		for {
			if _, ok := d.skip(depth + 1); !ok {
				return "", false
			}
			if d.peek() == ',' {
				d.i++
				continue
			}
			if d.peek() != ']' {
				return "", false
			}
			d.i++
			break
		}
	case c == 't':
		if !d.lit("true") {
			return "", false
		}
	case c == 'f':
		if !d.lit("false") {
			return "", false
		}
	case c == 'n':
		if !d.lit("null") {
			return "", false
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if !d.number() {
			return "", false
		}
	default:
		return "", false
	}
	d.ws()
	start += len(d.s[start:]) - len(trimLeftWS(d.s[start:]))
	return trimRightWS(d.s[start:d.i]), true
}

// number reads a JSON number.
func (d *chunkDecoder) number() bool {
	d.lit("-")
	switch {
	case d.lit("0"):
	case d.i < len(d.s) && d.s[d.i] >= '1' && d.s[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.lit(".") && !d.digits() {
		return false
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if !d.lit("+") {
			d.lit("-")
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

func (d *chunkDecoder) digits() bool {
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

func trimLeftWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	return s
}

func trimRightWS(s string) string {
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// top decodes the whole text into ch.
func (d *chunkDecoder) top(ch *chunk) bool {
	var seen [5]bool
	ok := d.object(func(key string) bool {
		k, ok := known(key, "choices", "usage", "error", "id", "object")
		if !ok {
			return false
		}
		switch k {
		case "id", "object":
			i, dst := 3, &ch.ID
			if k == "object" {
				i, dst = 4, &ch.Object
			}
			if seen[i] {
				return false
			}
			seen[i] = true
			v, ok := d.nullableStr()
			*dst = v
			return ok
		case "choices":
			if seen[0] {
				return false
			}
			seen[0] = true
			return d.choices(ch)
		case "usage":
			if seen[1] {
				return false
			}
			seen[1] = true
			return d.usage(ch)
		case "error":
			if seen[2] {
				return false
			}
			seen[2] = true
			raw, ok := d.skip(0)
			if ok {
				ch.Error = json.RawMessage(raw)
			}
			return ok
		}
		_, ok = d.skip(0)
		return ok
	})
	return ok && d.peek() == 0 && d.i == len(d.s)
}

func (d *chunkDecoder) choices(ch *chunk) bool {
	switch d.peek() {
	case 'n':
		return d.lit("null")
	case '[':
	default:
		return false
	}
	d.i++
	ch.Choices = []choice{}
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		var c choice
		if !d.choice(&c) {
			return false
		}
		ch.Choices = append(ch.Choices, c)
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

func (d *chunkDecoder) choice(c *choice) bool {
	var seen [5]bool
	return d.object(func(key string) bool {
		k, ok := known(key, "delta", "message", "text", "finish_reason", "index")
		if !ok {
			return false
		}
		var v string
		switch k {
		case "index":
			if seen[4] || d.peek() == 'n' {
				return false
			}
			seen[4] = true
			c.Index, ok = d.integer()
			return ok
		case "delta":
			if seen[0] {
				return false
			}
			seen[0] = true
			return d.content(&c.Delta.Content)
		case "message":
			if seen[1] {
				return false
			}
			seen[1] = true
			return d.content(&c.Message.Content)
		case "text":
			if seen[2] {
				return false
			}
			seen[2] = true
			v, ok = d.nullableStr()
			c.Text = v
			return ok
		case "finish_reason":
			if seen[3] {
				return false
			}
			seen[3] = true
			v, ok = d.nullableStr()
			c.FinishReason = v
			return ok
		}
		_, ok = d.skip(0)
		return ok
	})
}

// content reads {"content": ...} (or null) into dst.
func (d *chunkDecoder) content(dst *string) bool {
	if d.peek() == 'n' {
		return d.lit("null")
	}
	seen := false
	return d.object(func(key string) bool {
		k, ok := known(key, "content")
		if !ok {
			return false
		}
		if k == "content" {
			if seen {
				return false
			}
			seen = true
			v, ok := d.nullableStr()
			*dst = v
			return ok
		}
		_, ok = d.skip(0)
		return ok
	})
}

func (d *chunkDecoder) usage(ch *chunk) bool {
	if d.peek() == 'n' {
		return d.lit("null")
	}
	u := &struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}{}
	var seen [2]bool
	ok := d.object(func(key string) bool {
		k, ok := known(key, "prompt_tokens", "completion_tokens")
		if !ok {
			return false
		}
		switch k {
		case "prompt_tokens", "completion_tokens":
			i := 0
			if k == "completion_tokens" {
				i = 1
			}
			if seen[i] || d.peek() == 'n' {
				return false
			}
			seen[i] = true
			n, ok := d.integer()
			if i == 0 {
				u.PromptTokens = n
			} else {
				u.CompletionTokens = n
			}
			return ok
		}
		_, ok = d.skip(0)
		return ok
	})
	if ok {
		ch.Usage = u
	}
	return ok
}
