package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoopOrder(t *testing.T) {
	l := NewLoop(Epoch)
	var got []string
	add := func(d time.Duration, s string) *Timer {
		return l.After(d, func() { got = append(got, s) })
	}
	add(2*time.Second, "c")
	add(time.Second, "a")
	add(time.Second, "b") // same instant: scheduling order
	stopped := add(1500*time.Millisecond, "never")
	add(0, "now")
	require.True(t, l.Stop(stopped))
	require.False(t, l.Stop(stopped), "a stopped timer is not pending")
	l.After(time.Second, func() {
		got = append(got, "a2")
		l.After(0, func() { got = append(got, "nested") }) // same instant, after the rest
	})
	l.RunUntil(Epoch.Add(time.Second))
	require.Equal(t, []string{"now", "a", "b", "a2", "nested"}, got)
	require.Equal(t, Epoch.Add(time.Second), l.Now())
	l.RunUntil(Epoch.Add(10 * time.Second))
	require.Equal(t, []string{"now", "a", "b", "a2", "nested", "c"}, got)
	require.Equal(t, Epoch.Add(10*time.Second), l.Now(), "the clock moves to the end even when idle")
	_, ok := l.Next()
	require.False(t, ok)
}

func TestLoopPastEventRunsNow(t *testing.T) {
	l := NewLoop(Epoch.Add(time.Minute))
	ran := false
	l.At(Epoch, func() { ran = true })
	require.True(t, l.Step())
	require.True(t, ran)
	require.Equal(t, Epoch.Add(time.Minute), l.Now(), "time never goes backwards")
}

func TestRunWhile(t *testing.T) {
	l := NewLoop(Epoch)
	n := 0
	var tick func()
	tick = func() { n++; l.After(time.Second, tick) }
	l.After(time.Second, tick)
	l.RunWhile(Epoch.Add(time.Hour), func() bool { return n < 5 })
	require.Equal(t, 5, n)
	require.Equal(t, Epoch.Add(5*time.Second), l.Now())
	l.RunWhile(Epoch.Add(7500*time.Millisecond), func() bool { return true })
	require.Equal(t, 7, n)
	require.Equal(t, Epoch.Add(7500*time.Millisecond), l.Now())
}
