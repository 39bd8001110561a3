package testutil

import (
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
)

// DoneIDs is the sorted unsharded request ids of the terminal (done) events in the ledger
// of the run output directory dir: what a sharded run and its unsharded twin must agree on.
func DoneIDs(t testing.TB, dir string) []string {
	t.Helper()
	evs, _, err := ledger.ReadFile(filepath.Join(dir, ledger.EventsFile))
	require.NoError(t, err)
	var ids []string
	for _, e := range evs {
		if e.Type == ledger.EventDone {
			ids = append(ids, ledger.UnshardID(e.RequestID))
		}
	}
	sort.Strings(ids)
	return ids
}
