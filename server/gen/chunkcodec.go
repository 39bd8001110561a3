package gen

import (
	"encoding/json"
	"math"
	"pdsoak/internal/jsonnum"
	"strconv"
)

// The worker stream carries one WorkerChunk per event, and the router decodes every one
// of them: encoding/json's reflection was a tenth of the router's CPU. These fast paths
// handle the shapes workers actually send (token ids, the done fields; no error) and
// hand everything else to encoding/json, so the bytes on the wire and the decoded values
// are exactly encoding/json's (FuzzWorkerChunkCodec checks both against it).

// AppendWorkerChunk appends json.Marshal(c) to dst.
func AppendWorkerChunk(dst []byte, c *WorkerChunk) ([]byte, error) {
	if c.Error != nil || !plainString(c.Finish) {
		b, err := json.Marshal(c)
		return append(dst, b...), err
	}
	dst = append(dst, '{')
	comma := false
	field := func(name string) {
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
	}
	if len(c.TokenIDs) > 0 {
		field("token_ids")
		dst = append(dst, '[')
		for i, t := range c.TokenIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(t), 10)
		}
		dst = append(dst, ']')
	}
	if c.Done {
		field("done")
		dst = append(dst, "true"...)
	}
	if c.Finish != "" {
		field("finish_reason")
		dst = append(dst, '"')
		dst = append(dst, c.Finish...)
		dst = append(dst, '"')
	}
	if c.PromptTokens != 0 {
		field("prompt_tokens")
		dst = strconv.AppendInt(dst, int64(c.PromptTokens), 10)
	}
	if c.CompletionTokens != 0 {
		field("completion_tokens")
		dst = strconv.AppendInt(dst, int64(c.CompletionTokens), 10)
	}
	return append(dst, '}'), nil
}

// plainString reports whether json.Marshal writes s as is between quotes: printable
// ASCII without the characters it escapes (", \ and, for HTML safety, <, > and &).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// DecodeWorkerChunk is json.Unmarshal of data into a zero WorkerChunk.
func DecodeWorkerChunk(data string) (WorkerChunk, error) {
	if c, ok := fastChunk(data); ok {
		return c, nil
	}
	var c WorkerChunk
	err := json.Unmarshal([]byte(data), &c)
	return c, err
}

// fastChunk parses the compact form AppendWorkerChunk writes; ok is false for anything
// else (whitespace, escapes, other keys, an error object, null, repeated keys, numbers
// that are not plain integers of at most 18 digits).
func fastChunk(s string) (c WorkerChunk, ok bool) {
	p := chunkParser{s: s}
	if !p.eat('{') {
		return c, false
	}
	if p.eat('}') {
		return c, p.i == len(s)
	}
	var seen uint8
	for {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return c, false
		}
		var bit uint8
		switch key {
		case "token_ids":
			bit = 1
			if c.TokenIDs, ok = p.ints(); !ok {
				return c, false
			}
		case "done":
			bit = 2
			switch {
			case p.lit("true"):
				c.Done = true
			case p.lit("false"):
			default:
				return c, false
			}
		case "finish_reason":
			bit = 4
			if c.Finish, ok = p.str(); !ok {
				return c, false
			}
		case "prompt_tokens":
			bit = 8
			if c.PromptTokens, ok = p.int(); !ok {
				return c, false
			}
		case "completion_tokens":
			bit = 16
			if c.CompletionTokens, ok = p.int(); !ok {
				return c, false
			}
		default:
			return c, false
		}
		if seen&bit != 0 {
			return c, false
		}
		seen |= bit
		if p.eat('}') {
			return c, p.i == len(s)
		}
		if !p.eat(',') {
			return c, false
		}
	}
}

type chunkParser struct {
	s string
	i int
}

func (p *chunkParser) eat(b byte) bool {
	if p.i < len(p.s) && p.s[p.i] == b {
		p.i++
		return true
	}
	return false
}

func (p *chunkParser) lit(l string) bool {
	if len(p.s)-p.i >= len(l) && p.s[p.i:p.i+len(l)] == l {
		p.i += len(l)
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *chunkParser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
		p.i++
	}
	return "", false
}

// int reads an integer as JSON writes it: an optional minus, no leading zero.
func (p *chunkParser) int() (int, bool) {
	neg := p.eat('-')
	digits := p.i
	var v int64
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 18 || (n > 1 && p.s[digits] == '0') {
		return 0, false
	}
	if p.i < len(p.s) {
		if c := p.s[p.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	if int64(int(v)) != v { // 32-bit int: encoding/json refuses it
		return 0, false
	}
	return int(v), true
}

// ints reads an array of integers ("[]" is an empty, non-nil slice, as encoding/json
// makes it).
func (p *chunkParser) ints() ([]int, bool) {
	if !p.eat('[') {
		return nil, false
	}
	out := []int{}
	if p.eat(']') {
		return out, true
	}
	for {
		v, ok := p.int()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.eat(']') {
			return out, true
		}
		if !p.eat(',') {
			return nil, false
		}
	}
}

// AppendWorkerRequest appends json.Marshal(wr) to dst (the router encodes one per leg).
func AppendWorkerRequest(dst []byte, wr *WorkerRequest) ([]byte, error) {
	sp := &wr.SamplingParams
	if !plainString(wr.RID) || !plainString(wr.BootstrapAddr) || !finite(sp.Temperature) || !finite(sp.TopP) {
		b, err := json.Marshal(wr)
		return append(dst, b...), err
	}
	dst = append(dst, `{"rid":"`...)
	dst = append(dst, wr.RID...)
	dst = append(dst, `","input_ids":`...)
	if wr.InputIDs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, t := range wr.InputIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(t), 10)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"sampling_params":{"max_new_tokens":`...)
	dst = strconv.AppendInt(dst, int64(sp.MaxNewTokens), 10)
	dst = append(dst, `,"temperature":`...)
	dst = jsonnum.AppendFloat(dst, sp.Temperature)
	if sp.TopP != 0 {
		dst = append(dst, `,"top_p":`...)
		dst = jsonnum.AppendFloat(dst, sp.TopP)
	}
	if sp.Seed != 0 {
		dst = append(dst, `,"seed":`...)
		dst = strconv.AppendUint(dst, sp.Seed, 10)
	}
	if sp.IgnoreEOS {
		dst = append(dst, `,"ignore_eos":true`...)
	}
	dst = append(dst, '}')
	if wr.BootstrapRoom != nil {
		dst = append(dst, `,"bootstrap_room":`...)
		dst = strconv.AppendUint(dst, *wr.BootstrapRoom, 10)
	}
	if wr.BootstrapAddr != "" {
		dst = append(dst, `,"bootstrap_addr":"`...)
		dst = append(dst, wr.BootstrapAddr...)
		dst = append(dst, '"')
	}
	if wr.DeadlineUnixMs != 0 {
		dst = append(dst, `,"deadline_unix_ms":`...)
		dst = strconv.AppendInt(dst, wr.DeadlineUnixMs, 10)
	}
	if wr.DecodeOnly {
		dst = append(dst, `,"decode_only":true`...)
	}
	return append(dst, '}'), nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
