package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"pdsoak/suggest"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decode parses a scenario strictly, without applying defaults or validating. Unknown
// keys, duplicate keys and values of the wrong type are errors; every one is reported,
// each with its file, line and field path, as Problems. file names the source in problems.
// ${VAR} references are expanded from the process environment (see Expand).
func Decode(file string, data []byte) (*Scenario, error) {
	return DecodeEnv(file, data, nil)
}

// DecodeEnv is Decode with ${VAR} references looked up by lookup (nil: os.LookupEnv).
// Expansion happens on the parsed tree, before the strict walk, so every problem still
// points at its line; a variable without a default that is not set is a Problem.
func DecodeEnv(file string, data []byte, lookup LookupEnv) (*Scenario, error) {
	if lookup == nil {
		lookup = osLookup
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Problems{{File: file, Msg: "empty scenario"}}
		}
		return nil, Problems{syntaxProblem(file, data, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Problems{{File: file, Line: extra.Line, Msg: "more than one YAML document; a scenario is one document"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, Problems{syntaxProblem(file, data, err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, Problems{{File: file, Line: root.Line, Msg: "a scenario must be a YAML mapping (name: ..., workloads: ...)"}}
	}
	vars, probs := expandNodes(file, root, lookup)
	if len(probs) > 0 {
		return nil, probs.sorted()
	}
	w := &walker{file: file, pos: map[string]int{}, set: map[string]bool{}, anchored: map[string]anchorRef{}}
	w.walk(root, reflect.TypeFor[Scenario](), "")
	if len(w.problems) > 0 {
		return nil, w.problems.sorted()
	}
	sc := &Scenario{}
	if err := root.Decode(sc); err != nil {
		// The walker checks everything Decode checks; this is a safety net.
		return nil, Problems{{File: file, Line: root.Line, Msg: fmt.Sprintf("decode: %v", err)}}
	}
	sc.File = file
	sc.pos = w.pos
	sc.set = w.set
	sc.anchored = w.anchored
	sc.Env = vars
	secretEnv(sc) // header values stay out of every output
	return sc, nil
}

// tabHint is the problem for a syntax error caused by a tab in indentation: the parser's
// own message ("found character that cannot start any token") does not say so.
const tabHint = "YAML does not allow tabs for indentation; use spaces"

func syntaxProblem(file string, data []byte, err error) Problem {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	if tab := tabLine(data, line); tab > 0 {
		return Problem{File: file, Line: tab, Msg: tabHint}
	}
	return Problem{File: file, Line: line, Msg: "YAML syntax: " + msg}
}

// tabLine returns the line, near the parser's reported line, whose indentation holds a
// tab, or 0. The parser reports some tab errors at the line before the tab.
func tabLine(data []byte, reported int) int {
	if reported <= 0 {
		return 0
	}
	lines := strings.Split(string(data), "\n")
	for l := reported; l <= reported+1 && l <= len(lines); l++ {
		line := lines[l-1]
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") {
			return l
		}
	}
	return 0
}

// walker checks a YAML node tree against the Go types, records the line of every field
// path and collects every problem instead of stopping at the first.
//
// Inside an alias (*name) or a merge key (<<: *name) the lines recorded and reported are
// the alias's: the entry that uses the anchor is the one a problem is about (ten
// workloads merging one anchor are ten entries, each with its own start and duration).
// The anchor's own line goes into the message.
type walker struct {
	file     string
	pos      map[string]int
	set      map[string]bool
	anchored map[string]anchorRef
	problems Problems
	depth    int
	visits   int
	// via is the outermost alias being walked through, or nil.
	via *anchorRef
}

// anchorRef says where an aliased value came from: the anchor's name and the line of the
// value inside the anchor; Site is the line of the alias or merge key that used it.
type anchorRef struct {
	Name string
	Line int
	Site int
}

// maxVisits bounds the nodes walked, aliases expanded: an "alias bomb" (an anchor that
// aliases another ten times, nested) would otherwise take exponential time.
const maxVisits = 100_000

var durationType = reflect.TypeFor[Duration]()

func (w *walker) add(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if w.via != nil {
		msg += fmt.Sprintf(" (from anchor &%s, line %d)", w.via.Name, n.Line)
	}
	w.problems = append(w.problems, Problem{File: w.file, Line: w.line(n), Path: path, Msg: msg})
}

// line is the line recorded for n: its own, or inside an alias the alias's.
func (w *walker) line(n *yaml.Node) int {
	if w.via != nil {
		return w.via.Site
	}
	return n.Line
}

// record notes that path was present in the source, at key k.
func (w *walker) record(path string, k *yaml.Node) {
	w.pos[path] = w.line(k)
	w.set[path] = true
	if w.via != nil {
		w.anchored[path] = anchorRef{Name: w.via.Name, Line: k.Line, Site: w.via.Site}
	} else {
		delete(w.anchored, path)
	}
}

// enter starts walking the anchor an alias at line site refers to; the returned
// function restores the previous state. Only the outermost alias counts: it is the
// entry in the scenario that uses the anchor.
func (w *walker) enter(anchor *yaml.Node, site int) func() {
	if w.via != nil {
		return func() {}
	}
	w.via = &anchorRef{Name: anchor.Anchor, Line: anchor.Line, Site: site}
	return func() { w.via = nil }
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 64 {
		w.add(n, path, "nesting too deep")
		return
	}
	if w.visits++; w.visits == maxVisits {
		w.add(n, path, "too many nodes once aliases are expanded (more than %d)", maxVisits)
	}
	if w.visits >= maxVisits {
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			w.add(n, path, "unresolved alias")
			return
		}
		defer w.enter(n.Alias, n.Line)()
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // explicit null: leaves the zero value
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			w.add(n, path, "must be a duration such as 5s or 1m30s")
			return
		}
		if _, err := ParseDuration(n.Value); err != nil {
			w.add(n, path, "%s", strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		w.walkStruct(n, t, path)
	case reflect.Slice:
		w.walkSlice(n, t, path)
	case reflect.Map:
		w.walkMap(n, t, path)
	case reflect.Interface:
		// Free-form (fault params): anything YAML can hold.
	default:
		w.walkScalar(n, t, path)
	}
}

func (w *walker) walkSlice(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.SequenceNode {
		w.add(n, path, "must be a list")
		return
	}
	for i, c := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		w.record(p, c)
		w.walk(c, t.Elem(), p)
	}
}

func (w *walker) walkMap(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.add(n, path, "must be a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.add(k, path, "keys must be strings")
			continue
		}
		p := join(path, k.Value)
		if seen[k.Value] {
			w.add(k, p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		w.record(p, k)
		w.walk(v, t.Elem(), p)
	}
}

func (w *walker) walkScalar(n *yaml.Node, t reflect.Type, path string) {
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.add(n, path, "must be a string")
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			w.add(n, path, "must be true or false, got %s", describe(n))
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			w.add(n, path, "must be an integer, got %s", describe(n))
			return
		}
		var v int64
		if err := n.Decode(&v); err != nil {
			w.add(n, path, "integer out of range: %s", n.Value)
		}
	case reflect.Float64, reflect.Float32:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			w.add(n, path, "must be a number, got %s", describe(n))
			return
		}
		// .nan compares false with every bound Validate checks, and .inf overflows
		// every product: neither is ever a meaningful setting.
		var f float64
		if err := n.Decode(&f); err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			w.add(n, path, "must be a finite number, got %s", describe(n))
		}
	default:
		w.add(n, path, "unsupported field type %s", t)
	}
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		w.add(n, path, "must be a mapping, got %s", describe(n))
		return
	}
	// Merge keys first: the mapping's own keys override merged ones (YAML's rule), so
	// their lines must be the ones recorded.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; isMerge(k) {
			w.walkMerge(k, n.Content[i+1], t, path)
		}
	}
	fields := yamlFields(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.add(k, path, "keys must be strings")
			continue
		}
		if isMerge(k) {
			continue
		}
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			msg := "unknown field"
			if s := suggest.Closest(k.Value, slices.Sorted(maps.Keys(fields))); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			w.add(k, p, "%s", msg)
			continue
		}
		if seen[k.Value] {
			w.add(k, p, "duplicate key")
			continue
		}
		seen[k.Value] = true
		w.record(p, k)
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			// A key without a value is as if absent: its default applies, not the
			// zero value ("stream:" must not turn streaming off).
			delete(w.set, p)
		}
		w.walk(v, f.Type, p)
	}
}

// isMerge reports whether k is a merge key (<<: *anchor or <<: [*a, *b]).
func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge"
}

// walkMerge walks the value v of merge key k: its keys belong to the mapping at path.
func (w *walker) walkMerge(k, v *yaml.Node, t reflect.Type, path string) {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 64 {
		w.add(v, path, "merge keys nested too deep (or a merge that includes itself)")
		return
	}
	if w.visits++; w.visits == maxVisits {
		w.add(v, path, "too many nodes once aliases are expanded (more than %d)", maxVisits)
	}
	if w.visits >= maxVisits {
		return
	}
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		defer w.enter(v.Alias, k.Line)()
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		w.walkStruct(v, t, path)
	case yaml.SequenceNode:
		for _, c := range v.Content {
			w.walkMerge(k, c, t, path)
		}
	default:
		w.add(v, path, "a merge key (<<) needs a mapping or a list of mappings")
	}
}

// yamlFields maps the YAML keys of a struct type to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}
