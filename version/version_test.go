package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromBuildInfo(t *testing.T) {
	tests := []struct {
		name    string
		bi      debug.BuildInfo
		want    string
		wantRev string
	}{
		{"no vcs", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"pdsoak (devel) go1.26.8", ""},
		{"clean revision shortened", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}},
			"pdsoak v1.2.3 rev 0123456789ab go1.26.8", "0123456789abcdef0123"},
		{"modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"pdsoak (devel) rev abc (modified)", "abc+dirty"},
		{"nothing stamped", debug.BuildInfo{}, "pdsoak (unknown)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fromBuildInfo(&tt.bi)
			assert.Equal(t, tt.want, in.String())
			assert.Equal(t, tt.wantRev, in.RevisionString())
		})
	}
}
