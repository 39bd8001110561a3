package reports

import (
	"regexp"
	"strings"
)

// internalPrefix matches a Go package name used as an error prefix ("harness: ",
// "chaos: ", the standard library's "time: " and "strconv.ParseInt: ") at the start of
// a message or after another ": ".
var internalPrefix = regexp.MustCompile(`(^|: )(?:api|chaos|cli|client|engine|failpoint|gpu|harness|kernels|kvpool|kvtransfer|launcher|ledger|limits|netproxy|pdserver|render|reports|router|scenarios|scheduler|sse|supervisor|targets|time|version|workload|strconv\.\w+): `)

// Readable strips the package prefixes that Go errors carry ("harness: chaos: bad
// spec" becomes "bad spec"), for messages a user reads in a verdict or on the console.
func Readable(msg string) string {
	for {
		out := internalPrefix.ReplaceAllString(msg, "$1")
		if out == msg {
			return strings.TrimSpace(out)
		}
		msg = out
	}
}
