package testutil

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Healthy reports whether GET url answers 200 now.
func Healthy(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitHealthy waits, up to within, until GET url answers 200 (a server the test started
// is up), and fails the test otherwise.
func WaitHealthy(t testing.TB, url string, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return Healthy(url) }, within, 50*time.Millisecond, "%s never answered 200", url)
}
