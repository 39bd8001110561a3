package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/internal/testutil"
	"pdsoak/scenarios"
)

// docFiles are the documents whose commands TestDocCommands runs: docs/gpu-runners.md
// whole and the README's nightly section.
var docFiles = []struct{ path, section string }{
	{filepath.Join("..", "..", "docs", "gpu-runners.md"), ""},
	{filepath.Join("..", "..", "README.md"), "## Nightly"},
}

// docBlock is one fenced sh block and its marker.
type docBlock struct {
	file, mode string
	line       int      // of the fence
	commands   []string // continuation lines joined, comments dropped
}

var markerRE = regexp.MustCompile(`^<!-- doc-test: (run|plan|skip)\b[^>]*-->$`)

// parseDocBlocks finds every ```sh (or bash) block of text and the doc-test marker on the
// line before its fence. section, when set, limits the search to the part of text from
// the heading that starts with it to the next heading of the same level. A block without
// a marker is returned with mode "" (the test refuses it).
func parseDocBlocks(file, text, section string) ([]docBlock, error) {
	lines := strings.Split(text, "\n")
	first, last := 0, len(lines)
	if section != "" {
		first = -1
		level := strings.Count(strings.Fields(section)[0], "#")
		for i, l := range lines {
			if first < 0 && strings.HasPrefix(l, section) {
				first = i
				continue
			}
			if first >= 0 && strings.HasPrefix(l, strings.Repeat("#", level)+" ") {
				last = i
				break
			}
		}
		if first < 0 {
			return nil, fmt.Errorf("%s: no section %q", file, section)
		}
	}
	var out []docBlock
	for i := first; i < last; i++ {
		fence := strings.TrimSpace(lines[i])
		if fence != "```sh" && fence != "```bash" {
			continue
		}
		b := docBlock{file: file, line: i + 1}
		if i > 0 {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.mode = m[1]
			}
		}
		var cur strings.Builder
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			l := strings.TrimSpace(lines[j])
			if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
				// a comment line, or a blank one between commands
				continue
			}
			if strings.HasSuffix(l, `\`) {
				cur.WriteString(strings.TrimSuffix(l, `\`) + " ")
				continue
			}
			cur.WriteString(l)
			b.commands = append(b.commands, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
		if j == len(lines) {
			return nil, fmt.Errorf("%s:%d: unterminated fence", file, i+1)
		}
		if cur.Len() > 0 {
			return nil, fmt.Errorf("%s:%d: a command ends with a line continuation", file, i+1)
		}
		out = append(out, b)
		i = j
	}
	return out, nil
}

// docBoundsEnv bounds a doc command's run in time on the reference server (a pack's
// defaults are sized for GPU model loads and 10-minute requests); the workload and the
// recovery thresholds stay the document's.
var docBoundsEnv = []string{
	"START_TIMEOUT=60s", "FIRST_TOKEN_DEADLINE=8s", "STALL_DEADLINE=8s", "TOTAL_DEADLINE=12s",
	"DRAIN_TIMEOUT=15s", "LEAK_TIMEOUT=10s", "RECOVERY_WITHIN=10s",
}

var assignRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// docCommand is a parsed command line: environment assignments, then argv, and the exit
// code the document promises (a trailing "# exit N"; 0 when absent).
type docCommand struct {
	env  []string
	argv []string
	exit int
}

var exitNoteRE = regexp.MustCompile(`\s+#\s*exit\s+(\d)\s*$`)

// parseDocCommand splits a command line like a shell (scenarios.SplitWords) into its
// leading VAR=value assignments and the argv; it refuses pipes, lists and redirections,
// which the docs' tested blocks do not use.
func parseDocCommand(line string) (docCommand, error) {
	var c docCommand
	if m := exitNoteRE.FindStringSubmatchIndex(line); m != nil {
		c.exit = int(line[m[2]] - '0')
		line = line[:m[0]]
	}
	words, err := scenarios.SplitWords(line)
	if err != nil {
		return docCommand{}, err
	}
	for i, w := range words {
		if len(c.argv) == 0 && assignRE.MatchString(w) {
			c.env = append(c.env, w)
			continue
		}
		if w == "|" || w == "&&" || w == "||" || w == ";" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") {
			return docCommand{}, fmt.Errorf("word %d %q: only simple commands are tested", i+1, w)
		}
		c.argv = append(c.argv, w)
	}
	if len(c.argv) == 0 {
		return docCommand{}, fmt.Errorf("no command in %q", line)
	}
	return c, nil
}

// planArgs turns a harness command that would need a GPU into one that does not run load:
// run becomes plan (with plan's flags only), nightly gets --dry-run.
func planArgs(args []string) []string {
	if len(args) == 0 {
		return args
	}
	switch args[0] {
	case "run":
		out := []string{"plan"}
		for i := 1; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--out" || a == "--history" || a == "--label":
				i++ // the flag's value goes too
			case a == "-q" || a == "--quiet" || strings.HasPrefix(a, "--out=") || strings.HasPrefix(a, "--history=") || strings.HasPrefix(a, "--label="):
			default:
				out = append(out, a)
			}
		}
		return out
	case "nightly":
		return append([]string{"nightly", "--dry-run"}, args[1:]...)
	}
	return args
}

// TestDocCommands runs every command of docs/gpu-runners.md and of the README's nightly
// section. Markers (an HTML comment on the line before the fence):
//
//	<!-- doc-test: run -->   each command runs as written; bin/harness and bin/pdserver
//	                         are this test binary, `make build` is what go test already did,
//	                         and the reference is substituted: free ports for the packs'
//	                         *_PORT variables and the launch and request bounds of a short
//	                         window (docBoundsEnv: time, not the workload or the verdict's
//	                         thresholds), under the command's own assignments
//	<!-- doc-test: plan -->  needs a GPU: `harness run` becomes `harness plan`, `harness
//	                         nightly` gets --dry-run, with the command's environment
//	<!-- doc-test: skip (why) -->  machine setup the test cannot do (root, pip)
//
// A command exits 0 unless its line ends with "# exit N" (the document's promise, e.g.
// doctor's 1 on a machine without a GPU); any other code fails the test, so a doc command
// exiting 2 (bad usage, a scenario that does not load) always does. A ```sh block without
// a marker fails the test, and so does a program other than bin/harness, bin/pdserver and
// make build in a run or plan block. Each block runs in its own
// directory (scenarios/ linked in), in parallel with the others.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documents' commands on the reference server")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	scenariosDir, err := filepath.Abs(filepath.Join("..", "..", "scenarios"))
	require.NoError(t, err)
	seen := map[string]bool{}
	var blocks []docBlock
	for _, d := range docFiles {
		data, err := os.ReadFile(d.path)
		require.NoError(t, err)
		bs, err := parseDocBlocks(d.path, string(data), d.section)
		require.NoError(t, err)
		require.NotEmpty(t, bs, "%s has no sh block", d.path)
		blocks = append(blocks, bs...)
	}
	var ports sync.Mutex
	for _, b := range blocks {
		require.NotEmpty(t, b.mode, "%s:%d: a ```sh block without a <!-- doc-test: run|plan|skip --> marker", b.file, b.line)
		if b.mode == "skip" {
			t.Logf("%s:%d: skipped (marked)", b.file, b.line)
			continue
		}
		key := strings.Join(b.commands, "\n")
		if seen[key] {
			continue // the same commands in two documents: run once
		}
		seen[key] = true
		t.Run(fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.Symlink(scenariosDir, filepath.Join(dir, "scenarios")))
			for _, line := range b.commands {
				c, err := parseDocCommand(line)
				require.NoError(t, err, "%s:%d: %s", b.file, b.line, line)
				if strings.Join(c.argv, " ") == "make build" {
					continue // the test binary is the build
				}
				var args []string
				switch c.argv[0] {
				case "bin/harness":
					args = c.argv[1:]
				case "bin/pdserver":
					args = append([]string{"pdserver"}, c.argv[1:]...)
				default:
					t.Fatalf("%s:%d: %q is neither bin/harness nor bin/pdserver: mark the block skip or test it elsewhere", b.file, b.line, c.argv[0])
				}
				var env []string
				if b.mode == "run" {
					args = append([]string(nil), args...)
					ports.Lock()
					for i, p := range testutil.FreePorts(t, len(referencePorts)) {
						env = append(env, referencePorts[i]+"="+strconv.Itoa(p))
					}
					ports.Unlock()
					env = append(env, docBoundsEnv...)
				} else {
					args = planArgs(args)
				}
				for _, kv := range c.env {
					env = append(env, strings.ReplaceAll(kv, "bin/pdserver", exe+" pdserver"))
				}
				code, out := selfRunIn(t, dir, env, 5*time.Minute, args...)
				t.Logf("%s: exit %d", line, code)
				assert.Equal(t, c.exit, code, "%s:%d: %s exited %d, the document says %d\n%s", b.file, b.line, line, code, c.exit, lastLines(out, 40))
			}
		})
	}
}

// selfRunIn is selfRun in directory dir.
func selfRunIn(t *testing.T, dir string, env []string, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	wd := "PWD=" + dir // selfRun's child inherits the test's cwd otherwise
	return selfRunDir(t, dir, append(env, wd), timeout, args...)
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(s)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FuzzParseDocBlocks: the block parser never panics, and every command it returns is
// one line without a continuation.
func FuzzParseDocBlocks(f *testing.F) {
	f.Add("<!-- doc-test: run -->\n```sh\nmake build\nbin/harness run smoke \\\n  --duration 5s\n```\n", "")
	f.Add("## Nightly\n```sh\n# c\nbin/harness doctor\n```\n## Next\n```sh\nx\n```\n", "## Nightly")
	f.Add("```sh\nunterminated\n", "")
	f.Add("```bash\na \\\n```\n", "")
	f.Fuzz(func(t *testing.T, text, section string) {
		bs, err := parseDocBlocks("f.md", text, section)
		if err != nil {
			return
		}
		for _, b := range bs {
			for _, c := range b.commands {
				if strings.Contains(c, "\n") {
					t.Fatalf("command spans lines: %q", c)
				}
			}
		}
	})
}

func TestParseDocCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want docCommand
		err  string
	}{
		{line: "bin/harness doctor  # exit 1", want: docCommand{argv: []string{"bin/harness", "doctor"}, exit: 1}},
		{line: "A='x y' B=2 bin/harness run smoke", want: docCommand{env: []string{"A=x y", "B=2"}, argv: []string{"bin/harness", "run", "smoke"}}},
		{line: "bin/harness run smoke --label a=b", want: docCommand{argv: []string{"bin/harness", "run", "smoke", "--label", "a=b"}}},
		{line: "bin/harness list | head", err: "only simple commands"},
		{line: "bin/harness list > x", err: "only simple commands"},
		{line: "A=1", err: "no command"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := parseDocCommand(tc.line)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
