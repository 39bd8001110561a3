// Package testutil holds the few helpers several packages' tests share, so each test file
// does not write its own copy.
//
//	var logs testutil.SyncBuffer
//	h := slog.New(slog.NewTextHandler(&logs, nil)) // written by the server's goroutines
//	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "...") }, ...)
package testutil
