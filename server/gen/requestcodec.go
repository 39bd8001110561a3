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
	ok = p.object(func(key string) (bit uint8, ok bool) {
		switch key {
		case "rid":
			wr.RID, ok = p.str()
			return 1, ok
		case "input_ids":
			wr.InputIDs, ok = p.ints()
			return 2, ok
		case "sampling_params":
			wr.SamplingParams, ok = p.sampling()
			return 4, ok
		case "bootstrap_room":
			var room uint64
			if room, ok = p.uint(); ok {
				wr.BootstrapRoom = &room
			}
			return 8, ok
		case "bootstrap_addr":
			wr.BootstrapAddr, ok = p.str()
			return 16, ok
		case "deadline_unix_ms":
			var v int
			v, ok = p.int()
			wr.DeadlineUnixMs = int64(v)
			return 32, ok
		case "decode_only":
			wr.DecodeOnly, ok = p.bool()
			return 64, ok
		}
		return 0, false
	})
	return wr, ok && p.i == len(p.s)
}

// sampling reads a sampling_params object.
func (p *chunkParser) sampling() (sp WorkerSampling, ok bool) {
	ok = p.object(func(key string) (bit uint8, ok bool) {
		switch key {
		case "max_new_tokens":
			sp.MaxNewTokens, ok = p.int()
			return 1, ok
		case "temperature":
			sp.Temperature, ok = p.float()
			return 2, ok
		case "top_p":
			sp.TopP, ok = p.float()
			return 4, ok
		case "seed":
			sp.Seed, ok = p.uint()
			return 8, ok
		case "ignore_eos":
			sp.IgnoreEOS, ok = p.bool()
			return 16, ok
		}
		return 0, false
	})
	return sp, ok
}

// object reads a flat object of known keys: value reads the value of key and says which
// bit stands for the key (0: unknown); an unknown or repeated key declines the object.
func (p *chunkParser) object(value func(key string) (bit uint8, ok bool)) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	var seen uint8
	for {
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return false
		}
		bit, ok := value(key)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
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
