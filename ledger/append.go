package ledger

import (
	"math"
	"pdsoak/internal/jsonnum"
	"strconv"
	"unicode/utf8"
)

// appendEvent appends ev's JSON line (with its newline) to dst: the same bytes as
// json.Encoder.Encode (HTML escaping on), without reflection. The harness writes 4-5
// events per request, and reflective encoding was ~15 us of each under load.
//
// ok is false, with dst unchanged, for what it does not write itself: the nested and
// raw fields (params, server_debug, metrics, gpus, provenance, shard, models), which no
// per-request event but done-with-debug carries, and values encoding/json rejects
// (NaN or Inf floats, times outside RFC 3339); the caller then uses encoding/json.
func appendEvent(dst []byte, ev *Event) (_ []byte, ok bool) {
	if len(ev.Params) > 0 || len(ev.ServerDebug) > 0 || len(ev.Metrics) > 0 || len(ev.GPUs) > 0 ||
		ev.Provenance != nil || ev.Shard != nil || len(ev.Models) > 0 ||
		!finite(ev.TTFT) || !finite(ev.E2E) || !finite(ev.Age) || !finite(ev.Lag) ||
		!finite(ev.LagP99) || !finite(ev.LagMax) {
		return dst, false
	}
	for _, f := range ev.ITL {
		if !finite(f) {
			return dst, false
		}
	}
	b, ok := appendTime(append(dst, `{"time":`...), ev.Time)
	if !ok {
		return dst, false
	}
	b = append(b, `,"type":`...)
	b = appendString(b, string(ev.Type))
	b = appendStr(b, `,"request_id":`, ev.RequestID)
	b = appendStr(b, `,"workload":`, ev.Workload)
	b = appendInt(b, `,"session":`, int64(ev.Session))
	b = appendInt(b, `,"turn":`, int64(ev.Turn))
	b = appendStr(b, `,"endpoint":`, ev.Endpoint)
	if ev.Scheduled != nil {
		if b, ok = appendTime(append(b, `,"scheduled":`...), *ev.Scheduled); !ok {
			return dst, false
		}
	}
	b = appendInt(b, `,"prompt_tokens":`, int64(ev.PromptTokens))
	b = appendInt(b, `,"prompt_bytes":`, int64(ev.PromptBytes))
	b = appendStr(b, `,"outcome":`, string(ev.Outcome))
	b = appendStr(b, `,"cause":`, ev.Cause)
	b = appendStr(b, `,"phase":`, string(ev.Phase))
	b = appendInt(b, `,"status":`, int64(ev.Status))
	b = appendStr(b, `,"error":`, ev.Error)
	b = appendNum(b, `,"ttft":`, ev.TTFT)
	b = appendNum(b, `,"e2e":`, ev.E2E)
	if len(ev.ITL) > 0 {
		b = append(b, `,"itl":[`...)
		for i, f := range ev.ITL {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonnum.AppendFloat(b, f)
		}
		b = append(b, ']')
	}
	b = appendNum(b, `,"age":`, ev.Age)
	b = appendInt(b, `,"completion_tokens":`, int64(ev.CompletionTokens))
	b = appendInt(b, `,"chunks":`, int64(ev.Chunks))
	b = appendInt(b, `,"bytes":`, ev.Bytes)
	b = appendStr(b, `,"finish_reason":`, ev.FinishReason)
	b = appendStr(b, `,"probe":`, ev.Probe)
	b = appendStr(b, `,"text":`, ev.Text)
	b = appendInt(b, `,"conn_retry":`, int64(ev.ConnRetry))
	b = appendStr(b, `,"trace_id":`, ev.TraceID)
	b = appendNum(b, `,"lag":`, ev.Lag)
	// server_debug: fallback above.
	b = appendStr(b, `,"fault":`, ev.Fault)
	b = appendStr(b, `,"fault_type":`, ev.FaultType)
	b = appendStr(b, `,"target":`, ev.Target)
	// params: fallback above.
	if ev.Passed != nil {
		b = append(b, `,"passed":`...)
		b = strconv.AppendBool(b, *ev.Passed)
	}
	b = appendStr(b, `,"detail":`, ev.Detail)
	if ev.Started != nil {
		if b, ok = appendTime(append(b, `,"started":`...), *ev.Started); !ok {
			return dst, false
		}
	}
	b = appendInt(b, `,"part":`, int64(ev.Part))
	b = appendStr(b, `,"source":`, ev.Source)
	// metrics, gpus: fallback above.
	b = appendInt(b, `,"in_flight":`, int64(ev.InFlight))
	b = appendNum(b, `,"lag_p99":`, ev.LagP99)
	b = appendNum(b, `,"lag_max":`, ev.LagMax)
	b = appendStr(b, `,"scenario":`, ev.Scenario)
	b = appendInt(b, `,"seed":`, ev.Seed)
	b = appendStr(b, `,"url":`, ev.URL)
	// provenance: fallback above.
	b = appendStr(b, `,"interrupted":`, ev.Interrupted)
	b = appendStr(b, `,"mode":`, ev.Mode)
	// shard, models: fallback above.
	b = appendStr(b, `,"server_version":`, ev.ServerVersion)
	b = appendStr(b, `,"message":`, ev.Message)
	return append(b, '}', '\n'), true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// appendStr appends key and s unless s is empty (omitempty).
func appendStr(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendInt appends key and n unless n is 0 (omitempty).
func appendInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendNum appends key and f unless f is 0 or -0 (omitempty).
func appendNum(b []byte, key string, f float64) []byte {
	if f == 0 {
		return b
	}
	return jsonnum.AppendFloat(append(b, key...), f)
}

const hexDigits = "0123456789abcdef"

// appendString writes s quoted as encoding/json does with HTML escaping (its default):
// <, > and & as \u003c..., control bytes, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
