package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// listed is one package of `go list -json`.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// moduleRoot is the directory of the module's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("layering: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// goList runs `go list -json` on patterns in the module root: each package with its
// direct imports and its whole (non-test) dependency set.
func goList(t *testing.T, root string, patterns ...string) []listed {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	args := append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("layering: go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("layering: go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("layering: go list %v matched no package", patterns)
	}
	return pkgs
}

// matches reports whether import path p is pattern (exact) or under it ("x/..." matches
// x and everything below it).
func matches(p, pattern string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == tree || strings.HasPrefix(p, tree+"/")
	}
	return p == pattern
}

// violations lists "pkg depends on dep" for every forbidden dependency of pkgs.
func violations(pkgs []listed, forbidden []string) []string {
	var out []string
	for _, p := range pkgs {
		for _, d := range append([]string{p.ImportPath}, p.Deps...) {
			for _, f := range forbidden {
				if matches(d, f) && d != p.ImportPath {
					out = append(out, p.ImportPath+" depends on "+d)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestImportsFlowOneWay(t *testing.T) {
	root := moduleRoot(t)
	for _, r := range Rules {
		t.Run(r.From, func(t *testing.T) {
			for _, v := range violations(goList(t, root, r.From), r.Forbidden) {
				t.Errorf("%s (%s)", v, r.Why)
			}
		})
	}
	t.Run("the runner's importers", func(t *testing.T) {
		for _, p := range goList(t, root, "./...") {
			for _, imp := range p.Imports {
				if imp == Runner && !RunnerImporters[p.ImportPath] {
					t.Errorf("%s imports the runner %s: nothing but %v may (judging helpers belong in harness/judge)", p.ImportPath, Runner, keys(RunnerImporters))
				}
			}
		}
	})
}

// TestRuleMatcher pins what a rule's patterns match, so that a typo cannot make a rule
// vacuous.
func TestRuleMatcher(t *testing.T) {
	pkgs := []listed{
		{ImportPath: "pdsoak/sim", Deps: []string{"pdsoak/harness/judge", "pdsoak/ledger"}},
		{ImportPath: "pdsoak/reports", Deps: []string{"pdsoak/reports/internal/format"}},
		{ImportPath: "pdsoak/server/router", Deps: []string{"pdsoak/harness", "pdsoak/harnessx"}},
	}
	for _, tc := range []struct {
		name      string
		forbidden []string
		want      []string
	}{
		{"the runner alone is not its subpackages", []string{Runner}, []string{"pdsoak/server/router depends on pdsoak/harness"}},
		{"a tree covers its subpackages", []string{"pdsoak/harness/..."},
			[]string{"pdsoak/server/router depends on pdsoak/harness", "pdsoak/sim depends on pdsoak/harness/judge"}},
		{"a tree covers the package's own subpackages, not the package itself", []string{"pdsoak/reports/..."}, []string{"pdsoak/reports depends on pdsoak/reports/internal/format"}},
		{"a prefix is not a tree", []string{"pdsoak/harnes/..."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(pkgs, tc.forbidden)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("violations = %q, want %q", got, tc.want)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// countLines counts a file's lines (a last line without a newline counts).
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

func TestFileSizes(t *testing.T) {
	root := moduleRoot(t)
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// Hidden trees (.git), testdata and build outputs hold no package code.
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		n, err := countLines(path)
		if err != nil {
			return err
		}
		if n <= MaxLines {
			return nil
		}
		if who, ok := Oversize[rel]; ok {
			seen[rel] = true
			t.Logf("%s: %d lines, over %d, exempt while it is split (%s)", rel, n, MaxLines, who)
			return nil
		}
		t.Errorf("%s: %d lines, over %d: split it by idea into files of its package", rel, n, MaxLines)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range Oversize {
		if !seen[rel] {
			t.Errorf("%s is listed in Oversize but is not over %d lines (or is gone): delete its entry", rel, MaxLines)
		}
	}
}
