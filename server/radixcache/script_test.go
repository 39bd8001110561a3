package radixcache

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// A script is blocks of a command, a "----" line and the one-line expected output;
// blank and '#' lines between blocks are comments. Tokens are the characters of seq.
//
//	new page=2
//	insert seq=abcd pages=1,2
//	match seq=abcx
//	----
//	pages=[1] tokens=2
//
// Commands: new page=N · match seq=S [lock=NAME] · unlock name=NAME ·
// insert seq=S pages=P,... · evict n=N · stats. Every command is followed by Check.
func runScript(t *testing.T, src string) string {
	t.Helper()
	var c *Cache
	held := map[string]Match{}
	var out strings.Builder
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			out.WriteString(lines[i] + "\n")
			continue
		}
		out.WriteString(l + "\n")
		args := map[string]string{}
		f := strings.Fields(l)
		for _, a := range f[1:] {
			k, v, _ := strings.Cut(a, "=")
			args[k] = v
		}
		tokens := func() []int {
			var ts []int
			for _, r := range args["seq"] {
				ts = append(ts, int(r))
			}
			return ts
		}
		var res string
		switch f[0] {
		case "new":
			p, err := strconv.Atoi(args["page"])
			require.NoError(t, err, "line %d", i+1)
			c = New(p)
			res = "ok"
		case "match":
			m := c.Match(tokens())
			if name := args["lock"]; name != "" {
				c.Lock(m)
				held[name] = m
			}
			res = fmt.Sprintf("pages=%v tokens=%d", m.Pages, m.Tokens)
		case "unlock":
			c.Unlock(held[args["name"]])
			delete(held, args["name"])
			res = "ok"
		case "insert":
			var pages []int32
			for _, s := range strings.Split(args["pages"], ",") {
				p, err := strconv.Atoi(s)
				require.NoError(t, err, "line %d", i+1)
				pages = append(pages, int32(p))
			}
			res = fmt.Sprintf("dup=%v", c.Insert(tokens(), pages))
		case "evict":
			n, err := strconv.Atoi(args["n"])
			require.NoError(t, err, "line %d", i+1)
			res = fmt.Sprintf("freed=%v", c.Evict(n))
		case "stats":
			s := c.Stats()
			res = fmt.Sprintf("cached=%d evictable=%d locked_nodes=%d evicted=%d", s.CachedPages, s.EvictablePages, s.LockedNodes, s.EvictedPages)
		default:
			t.Fatalf("line %d: unknown command %q", i+1, f[0])
		}
		require.NoError(t, c.Check(), "line %d: %s", i+1, l)
		out.WriteString("----\n" + res + "\n")
		// Skip the script's own expected output: "----" and one line.
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "----" {
			i += 2
		}
	}
	return strings.TrimRight(out.String(), "\n") + "\n"
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			got := runScript(t, string(src))
			if *update {
				require.NoError(t, os.WriteFile(file, []byte(got), 0o644))
				return
			}
			require.Equal(t, string(src), got, "run go test ./server/radixcache -update and check the diff")
		})
	}
}
