package reports

import (
	"fmt"
	"strings"

	"pdsoak/ledger"
)

// connRetries counts the done events whose request was re-sent on a fresh connection
// (conn_retry) and names the first few.
type connRetries struct {
	n   int
	ids []string
}

func (c *connRetries) add(e ledger.Event) {
	if e.ConnRetry > 0 {
		c.n++
		if len(c.ids) < 3 {
			c.ids = append(c.ids, e.RequestID)
		}
	}
}

// result sets r.ConnRetries and, when there are any, adds the note that says what they
// may mean.
func (c *connRetries) result(r *Results) {
	if r.ConnRetries = c.n; c.n > 0 {
		r.Notes = append(r.Notes, connRetryNote(c.n, c.ids))
	}
}

// connRetryNote says how many requests were re-sent after a reused connection ended
// before any byte of the answer, and what that may mean (README: the idle keep-alive race).
func connRetryNote(n int, ids []string) string {
	eg := ""
	if len(ids) > 0 {
		eg = " (e.g. " + strings.Join(ids, ", ") + ")"
	}
	return fmt.Sprintf("%d %s re-sent once on a fresh connection after a reused one ended before any byte of the answer%s: "+
		"the idle keep-alive race, or a server (or proxy) that read the request and then lost the connection, in which case the server saw it twice",
		n, map[bool]string{true: "request was", false: "requests were"}[n == 1], eg)
}
