package supervisor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    byte
		wantErr bool
	}{
		{name: "plain", line: "42 (pdserver) S 1 42 42 0 -1", want: 'S'},
		{name: "stopped", line: "42 (pdserver) T 1", want: 'T'},
		{name: "comm with spaces and parens", line: "7 (a) b (c) Z 1 7", want: 'Z'},
		{name: "no paren", line: "42 pdserver S", wantErr: true},
		{name: "nothing after paren", line: "42 (x)", wantErr: true},
		{name: "no space after paren", line: "42 (x)S 1", wantErr: true},
		{name: "empty", line: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (pdserver) S 1 42"))
	f.Add([]byte("7 (a) b (c) Z 1 7"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, data []byte) {
		letter, err := ParseStat(data)
		if err == nil {
			assert.NotZero(t, len(data))
			_ = stateOf(letter)
		}
	})
}

func TestStateOf(t *testing.T) {
	tests := []struct {
		letter byte
		want   State
	}{
		{'R', StateRunning}, {'S', StateRunning}, {'D', StateRunning},
		{'T', StateStopped}, {'t', StateStopped}, {'Z', StateZombie}, {'X', StateGone},
	}
	for _, tt := range tests {
		t.Run(string(tt.letter), func(t *testing.T) { assert.Equal(t, tt.want, stateOf(tt.letter)) })
	}
}

func TestReadState(t *testing.T) {
	st, err := ReadState(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, StateRunning, st)
	st, err = ReadState(1 << 30) // beyond pid_max
	require.NoError(t, err)
	assert.Equal(t, StateGone, st)
	_, err = ReadState(0)
	require.Error(t, err)
}
