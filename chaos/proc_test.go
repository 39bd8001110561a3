package chaos

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/supervisor"
)

// ProcState reads through the supervisor's /proc reader (its parser has the table and
// fuzz tests) and keeps chaos's contract: a missing pid is ErrNoProcess.
func TestProcState(t *testing.T) {
	tests := []struct {
		name    string
		pid     int
		want    supervisor.State
		wantErr error
		anyErr  bool
	}{
		{name: "own process runs", pid: os.Getpid(), want: supervisor.StateRunning},
		{name: "missing pid", pid: 1 << 30, want: supervisor.StateGone, wantErr: ErrNoProcess},
		{name: "bad pid", pid: 0, want: supervisor.StateGone, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := ProcState(tt.pid)
			assert.Equal(t, tt.want, st)
			switch {
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			case tt.anyErr:
				require.Error(t, err)
				assert.NotErrorIs(t, err, ErrNoProcess)
				assert.Contains(t, err.Error(), "chaos: ")
			default:
				require.NoError(t, err)
			}
		})
	}
	ok, st, err := alive(nil, os.Getpid())
	require.NoError(t, err)
	assert.True(t, ok, "own process alive, state %s", st)
	ok, _, err = alive(nil, 1<<30)
	require.NoError(t, err)
	assert.False(t, ok, "a missing pid is not alive")
}
