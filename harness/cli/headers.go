package cli

import (
	"net/http"

	"github.com/spf13/pflag"

	"pdsoak/scenarios"
)

// headerFlag is the repeatable --header 'Name: value' of run, validate, plan, explore and
// shards: it adds to (or replaces in) target.headers. Values are secrets: nothing
// prints them.
type headerFlag []string

func registerHeaders(fs *pflag.FlagSet, h *headerFlag) {
	fs.StringArrayVar((*[]string)(h), "header", nil, "a request header 'Name: value' sent to the target, repeatable; sets target.headers[Name] (${VAR} is not expanded here: the shell does it). The value is never written to any output")
}

// apply sets the flags' headers on sc; a malformed flag is a usage error.
func (h headerFlag) apply(sc *scenarios.Scenario) error {
	for _, s := range h {
		name, value, err := scenarios.ParseHeaderFlag(s)
		if err != nil {
			return usageError("%s", err.Error()[len("scenarios: "):])
		}
		if sc.Target.Headers == nil {
			sc.Target.Headers = scenarios.Headers{}
		}
		for k := range sc.Target.Headers { // names ignore case: replace, never add beside
			if http.CanonicalHeaderKey(k) == http.CanonicalHeaderKey(name) {
				delete(sc.Target.Headers, k)
			}
		}
		sc.Target.Headers[name] = value
	}
	return nil
}
