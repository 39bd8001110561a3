package k8s_test

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/harness/k8s"
)

// stage is one FROM ... AS name block of a Dockerfile with its instructions.
type stage struct {
	from, name string
	lines      []string // instructions, continuation lines joined
}

// parseDockerfile splits a Dockerfile into stages (enough for the checks below: comments,
// continuations, FROM ... AS ...).
func parseDockerfile(data string) []stage {
	var stages []stage
	var cur string
	flush := func() {
		if cur == "" {
			return
		}
		f := strings.Fields(cur)
		if strings.EqualFold(f[0], "FROM") {
			s := stage{from: f[1]}
			if len(f) >= 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
		} else if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, cur)
		}
		cur = ""
	}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		cur += l
		flush()
	}
	flush()
	return stages
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	stages := parseDockerfile(string(data))
	require.Len(t, stages, 2, "a builder and a final stage")
	build, final := stages[0], stages[1]
	assert.Equal(t, "golang:1.26", build.from)
	buildText := strings.Join(build.lines, "\n")
	assert.Contains(t, buildText, "CGO_ENABLED=0 go build", "static binaries")
	assert.Contains(t, buildText, "./cmd/harness")
	assert.Contains(t, buildText, "./cmd/pdserver")

	assert.True(t, strings.HasPrefix(final.from, "gcr.io/distroless/static"), final.from)
	assert.True(t, strings.HasSuffix(final.from, ":nonroot"), final.from)
	finalText := strings.Join(final.lines, "\n")
	assert.Contains(t, finalText, "COPY --from="+build.name+" ")
	// The manifests run these paths as uid 65532 (distroless's nonroot).
	assert.Contains(t, finalText, "/usr/local/bin/")
	assert.Equal(t, "/usr/local/bin/harness", k8s.HarnessBin)
	assert.Equal(t, "/usr/local/bin/pdserver", k8s.PDServerBin)
	assert.Contains(t, final.lines, "USER nonroot:nonroot")
	assert.Equal(t, 65532, k8s.NonRootUID)
	for _, l := range final.lines {
		assert.False(t, strings.HasPrefix(l, "RUN "), "the final image has no shell to RUN: %s", l)
	}
}

func TestParseDockerfile(t *testing.T) {
	got := parseDockerfile("# c\nFROM a AS b\nRUN x \\\n  y\n\nFROM c\nUSER u\n")
	require.Len(t, got, 2)
	assert.Equal(t, stage{from: "a", name: "b", lines: []string{"RUN x  y"}}, got[0])
	assert.Equal(t, stage{from: "c", lines: []string{"USER u"}}, got[1])
}
