package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

//go:embed *.yaml zoo/*.yaml traces/*.jsonl traces/*.csv
var embedded embed.FS

// ZooDir is the folder of the bug zoo: one scenario per upstream SGLang PD bug the
// reference server reproduces (--sglang-bug). zoo/<bug>.yaml is named ZooPrefix+<bug>
// ("zoo-decode-oom-requeue"); Load also takes "zoo/<bug>".
const (
	ZooDir    = "zoo"
	ZooPrefix = "zoo-"
)

// ErrNotFound is returned (wrapped) by Load when a name is neither a file nor an
// embedded scenario.
var ErrNotFound = errors.New("scenario not found")

// Info describes an embedded scenario.
type Info struct {
	Name    string // the name Load accepts, e.g. "smoke"
	File    string // e.g. "smoke.yaml"
	Summary string // the first line of the header comment
	// Expected is the verdict the header comment promises ("PASS", "FAIL"), if it says.
	Expected string
	// Upstream is the upstream report the scenario reproduces (its header's
	// "Upstream:" line), e.g. "sgl-project/sglang#6857"; empty for most scenarios.
	Upstream string
}

// List returns the embedded scenarios, sorted by name.
func List() []Info {
	var out []Info
	for _, dir := range []string{".", ZooDir} {
		ents, err := fs.ReadDir(embedded, dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			file := path.Join(dir, e.Name())
			data, err := embedded.ReadFile(file)
			if err != nil {
				continue
			}
			name := strings.TrimSuffix(e.Name(), ".yaml")
			if dir == ZooDir {
				name = ZooPrefix + name
			}
			out = append(out, Info{Name: name, File: file,
				Summary: headerSummary(data), Expected: headerExpected(data), Upstream: headerField(data, "Upstream:")})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Embedded returns the bytes of an embedded scenario by name ("smoke" or "smoke.yaml";
// a zoo scenario as "zoo/decode-oom-requeue").
func Embedded(name string) ([]byte, bool) {
	dir, file := ".", name
	if rest, ok := strings.CutPrefix(file, ZooDir+"/"); ok {
		dir, file = ZooDir, rest
	} else if rest, ok := strings.CutPrefix(file, ZooPrefix); ok {
		dir, file = ZooDir, rest
	}
	if file == "" || strings.ContainsAny(file, "/\\") {
		return nil, false
	}
	if !strings.HasSuffix(file, ".yaml") {
		file += ".yaml"
	}
	data, err := embedded.ReadFile(path.Join(dir, file))
	return data, err == nil
}

// headerSummary returns the first comment line of a scenario, minus the "# name:" prefix.
func headerSummary(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if line == "" {
			continue
		}
		if _, rest, ok := strings.Cut(line, ": "); ok && !strings.Contains(line[:strings.Index(line, ": ")], " ") {
			return rest
		}
		return line
	}
	return ""
}

// headerField returns the rest of the first header comment line holding key.
func headerField(data []byte, key string) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			break
		}
		if _, rest, ok := strings.Cut(line, key); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// headerExpected returns the verdict word after "Expected verdict:" in the header comment.
func headerExpected(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			break
		}
		if _, rest, ok := strings.Cut(line, "Expected verdict:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strings.Trim(f[0], ".,;")
			}
		}
	}
	return ""
}

// Load reads a scenario from a file path, or else an embedded scenario by name, decodes it
// strictly, applies defaults and validates it. A bad scenario yields Problems; a name
// that is neither a file nor embedded yields an error wrapping ErrNotFound.
func Load(nameOrPath string, opts ...Option) (*Scenario, error) {
	data, err := os.ReadFile(nameOrPath)
	file := nameOrPath
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			// A path that exists but is no readable file (a directory, no permission)
			// is bad input, not a failure of the run.
			msg := err.Error()
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
				msg = pe.Err.Error()
			}
			return nil, Problems{{File: nameOrPath, Msg: "cannot read the scenario: " + msg}}
		}
		var ok bool
		data, ok = Embedded(nameOrPath)
		if !ok {
			names := make([]string, 0)
			for _, i := range List() {
				names = append(names, i.Name)
			}
			return nil, fmt.Errorf("scenarios: %q is neither a file nor an embedded scenario (embedded: %s): %w",
				nameOrPath, strings.Join(names, ", "), ErrNotFound)
		}
		file = path.Base(strings.TrimSuffix(nameOrPath, ".yaml") + ".yaml")
	}
	return Parse(file, data, opts...)
}

// Parse decodes a scenario strictly, applies overrides and defaults, and validates it.
func Parse(file string, data []byte, opts ...Option) (*Scenario, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sc, err := DecodeEnv(file, data, o.lookup)
	if err != nil {
		return nil, onePass(file, data, o, err)
	}
	for _, fn := range o.overrides {
		fn(sc)
	}
	sc.ApplyDefaults()
	if err := sc.Validate(opts...); err != nil {
		return nil, err
	}
	return sc, nil
}
