package gen

import "strconv"

// Every worker parses one WorkerRequest per leg; encoding/json's reflection was about
// a sixteenth of a worker's CPU at zero-compute load (BenchmarkRouterZeroTime's
// profile). FastWorkerRequest reads the compact form AppendWorkerRequest writes and
// declines everything else, which the caller hands to encoding/json: whatever it
// accepts, it decodes exactly as json.Unmarshal would (FuzzFastWorkerRequest).

// FastWorkerRequest decodes data, when it is in the compact form AppendWorkerRequest
// writes, into what json.Unmarshal would make of it; ok is false for anything else
// (whitespace, escapes or non-ASCII in strings, keys it does not know or that repeat,
// null, numbers beyond the plain forms), which the caller must then decode with
// encoding/json.
func FastWorkerRequest(data []byte) (wr WorkerRequest, ok bool) {
	p := chunkParser{s: string(data)}
	if !p.eat('{') {
		return wr, false
	}
	if p.eat('}') {
		return wr, p.i == len(p.s)
	}
	var seen uint8
	for {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return wr, false
		}
		var bit uint8
		switch key {
		case "rid":
			bit = 1
			wr.RID, ok = p.str()
		case "input_ids":
			bit = 2
			wr.InputIDs, ok = p.ints()
		case "sampling_params":
			bit = 4
			wr.SamplingParams, ok = p.sampling()
		case "bootstrap_room":
			bit = 8
			var room uint64
			if room, ok = p.uint(); ok {
				wr.BootstrapRoom = &room
			}
		case "bootstrap_addr":
			bit = 16
			wr.BootstrapAddr, ok = p.str()
		case "deadline_unix_ms":
			bit = 32
			var v int
			v, ok = p.int()
			wr.DeadlineUnixMs = int64(v)
		case "decode_only":
			bit = 64
			wr.DecodeOnly, ok = p.bool()
		default:
			return wr, false
		}
		if !ok || seen&bit != 0 {
			return wr, false
		}
		seen |= bit
		if p.eat('}') {
			return wr, p.i == len(p.s)
		}
		if !p.eat(',') {
			return wr, false
		}
	}
}

// sampling reads a sampling_params object.
func (p *chunkParser) sampling() (sp WorkerSampling, ok bool) {
	if !p.eat('{') {
		return sp, false
	}
	if p.eat('}') {
		return sp, true
	}
	var seen uint8
	for {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return sp, false
		}
		var bit uint8
		switch key {
		case "max_new_tokens":
			bit = 1
			sp.MaxNewTokens, ok = p.int()
		case "temperature":
			bit = 2
			sp.Temperature, ok = p.float()
		case "top_p":
			bit = 4
			sp.TopP, ok = p.float()
		case "seed":
			bit = 8
			sp.Seed, ok = p.uint()
		case "ignore_eos":
			bit = 16
			sp.IgnoreEOS, ok = p.bool()
		default:
			return sp, false
		}
		if !ok || seen&bit != 0 {
			return sp, false
		}
		seen |= bit
		if p.eat('}') {
			return sp, true
		}
		if !p.eat(',') {
			return sp, false
		}
	}
}

func (p *chunkParser) bool() (v, ok bool) {
	switch {
	case p.lit("true"):
		return true, true
	case p.lit("false"):
		return false, true
	}
	return false, false
}

// digits skips a run of decimal digits and returns how many there were.
func (p *chunkParser) digits() int {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// uint reads an unsigned integer as JSON writes it (no sign, no leading zero, no
// fraction or exponent) that fits in a uint64.
func (p *chunkParser) uint() (uint64, bool) {
	start := p.i
	n := p.digits()
	if n == 0 || (n > 1 && p.s[start] == '0') {
		return 0, false
	}
	if p.i < len(p.s) {
		if c := p.s[p.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(p.s[start:p.i], 10, 64)
	return v, err == nil
}

// float reads a number in JSON's grammar (-?int frac? exp?) that parses as a float64
// without overflow, as encoding/json decodes it (strconv.ParseFloat).
func (p *chunkParser) float() (float64, bool) {
	start := p.i
	p.eat('-')
	intStart := p.i
	n := p.digits()
	if n == 0 || (n > 1 && p.s[intStart] == '0') {
		return 0, false
	}
	if p.eat('.') && p.digits() == 0 {
		return 0, false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if p.digits() == 0 {
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(p.s[start:p.i], 64)
	return v, err == nil
}
