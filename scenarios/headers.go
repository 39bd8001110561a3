package scenarios

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"pdsoak/internal/http1"
)

// Redacted stands for a header value in every output.
const Redacted = "<redacted>"

// Headers are request headers (name: value). Values are secrets by default: they are
// sent, but JSON and YAML encodings (scenario.json, plan output) show Redacted instead.
type Headers map[string]string

// MarshalJSON writes the names with redacted values.
func (h Headers) MarshalJSON() ([]byte, error) { return json.Marshal(h.redacted()) }

// MarshalYAML writes the names with redacted values.
func (h Headers) MarshalYAML() (any, error) { return h.redacted(), nil }

func (h Headers) redacted() map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = Redacted
	}
	return out
}

// HTTP returns h as an http.Header (canonical names), with over's entries replacing
// same-named ones; nil when both are empty.
func (h Headers) HTTP(over Headers) http.Header {
	if len(h) == 0 && len(over) == 0 {
		return nil
	}
	out := make(http.Header, len(h)+len(over))
	for _, m := range []Headers{h, over} {
		for k, v := range m {
			out[http.CanonicalHeaderKey(k)] = []string{v}
		}
	}
	return out
}

// ownedHeaders are set by the client itself; a scenario may not replace them.
var ownedHeaders = []string{"Host", "Content-Length", "Content-Type", "Accept", "Accept-Encoding", "X-Request-Id",
	"Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade"}

// headerProblems lists what is wrong with h (never showing a value).
func headerProblems(h Headers) []string {
	var out []string
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	first := map[string]string{} // canonical name -> the name as first written
	for _, k := range names {
		ck := http.CanonicalHeaderKey(k)
		if prev, ok := first[ck]; ok {
			// Both would go out from a map: the one the server sees left to chance.
			out = append(out, fmt.Sprintf("%s is given twice (%q and %q); header names ignore case", ck, prev, k))
			continue
		}
		first[ck] = k
		switch {
		case !http1.ValidHeaderName(k):
			out = append(out, fmt.Sprintf("%q is not a valid header name (letters, digits and !#$%%&'*+-.^_`|~)", k))
		case contains(ownedHeaders, ck):
			out = append(out, fmt.Sprintf("%s is set by the client itself and cannot be replaced", ck))
		case !http1.ValidHeaderValue(h[k]):
			out = append(out, fmt.Sprintf("the value of %s has a control character (a line break?); the value is not shown", ck))
		}
	}
	return out
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// ParseHeaderFlag parses one --header 'Name: value'.
func ParseHeaderFlag(s string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", "", fmt.Errorf("scenarios: --header wants 'Name: value', got a value without a colon")
	}
	return name, strings.TrimSpace(value), nil
}

// secretEnv marks the variables whose values ended up in a header as secret, so plan
// output shows them redacted too.
func secretEnv(sc *Scenario) {
	var values []string
	for _, v := range sc.Target.Headers {
		values = append(values, v)
	}
	for _, w := range sc.Workloads {
		for _, v := range w.Headers {
			values = append(values, v)
		}
	}
	for i := range sc.Env {
		for _, v := range values {
			if sc.Env[i].Value != "" && strings.Contains(v, sc.Env[i].Value) {
				sc.Env[i].Secret = true
			}
		}
	}
}

// checkClient checks what configures the HTTP client: headers, TLS, idle timeout.
func (v *validator) checkClient() {
	sc := v.sc
	for _, p := range headerProblems(sc.Target.Headers) {
		v.add("target.headers", "%s", p)
	}
	for i, w := range sc.Workloads {
		for _, p := range headerProblems(w.Headers) {
			v.add(fmt.Sprintf("workloads[%d].headers", i), "%s", p)
		}
	}
	if sc.Target.IdleTimeout < 0 {
		v.add("target.idle_timeout", "must be >= 0 (0: the default, 4s)")
	}
	if t := sc.Target.TLS; t != nil {
		if !strings.HasPrefix(sc.Target.URL, "https://") {
			v.add("target.tls", "applies only to an https:// target.url (this one is %q)", sc.Target.URL)
		}
		if t.CAFile != "" {
			if _, err := TLSConfig(t); err != nil {
				v.add("target.tls.ca_file", "%v", strings.TrimPrefix(err.Error(), "scenarios: "))
			}
		}
	}
}
