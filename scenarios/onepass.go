package scenarios

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// onePass adds the validator's problems to the decoder's, so that one `validate`
// reports everything: a misspelled assertion together with an unknown field, a
// deadline problem together with a bad duration. The entries the decoder refused are
// taken out of a copy of the tree, the rest is decoded, defaulted and validated as
// usual, and the validator's problems about a refused entry (or inside one) are left
// out: the decoder's say it better. Anything that stops the second pass (a syntax
// error, an unset variable) leaves the decoder's problems as they were.
func onePass(file string, data []byte, o options, decodeErr error) error {
	var probs Problems
	if !errors.As(decodeErr, &probs) || len(probs) == 0 {
		return decodeErr
	}
	for _, p := range probs {
		if p.Path == "" || strings.Contains(p.Msg, "too many nodes") || strings.Contains(p.Msg, "too deep") {
			return decodeErr // about the whole file, or a tree not worth walking twice
		}
	}
	var doc yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
		return decodeErr
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if _, eprobs := expandNodes(file, root, o.lookupOrOS()); len(eprobs) > 0 {
		return decodeErr
	}
	for _, p := range probs {
		removePath(root, p.Path)
	}
	sc := &Scenario{}
	if root.Decode(sc) != nil {
		return decodeErr
	}
	// Lines come from a walk of the pruned tree (it finds no problem there).
	w := &walker{file: file, pos: map[string]int{}, set: map[string]bool{}, anchored: map[string]anchorRef{}}
	w.walk(root, reflectScenario, "")
	sc.File, sc.pos, sc.set, sc.anchored = file, w.pos, w.set, w.anchored
	for _, fn := range o.overrides {
		fn(sc)
	}
	sc.ApplyDefaults()
	v := &validator{sc: sc}
	v.check(o)
	out := append(Problems(nil), probs...)
	for _, vp := range v.problems {
		if !underAny(vp.Path, probs) {
			out = append(out, vp)
		}
	}
	return out.sorted()
}

// underAny reports whether path is one of the problems' paths, inside one, or holds
// one (a list that lost a bad element is short for that reason only).
func underAny(path string, probs Problems) bool {
	for _, p := range probs {
		if within(path, p.Path) || within(p.Path, path) {
			return true
		}
	}
	return false
}

// within reports whether path is root or inside it.
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, root+".") || strings.HasPrefix(path, root+"[")
}

// removePath takes the entry at a field path ("workloads[0].pacer.rate") out of the
// tree: a mapping entry is deleted, a list element becomes null. A path that does not
// lead anywhere (through an alias, a merge key) is left alone.
func removePath(root *yaml.Node, path string) {
	segs := splitPath(path)
	n := root
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s.key != "" && n.Kind == yaml.MappingNode:
			j := mappingIndex(n, s.key)
			if j < 0 {
				return
			}
			if last {
				n.Content = append(n.Content[:j:j], n.Content[j+2:]...)
				return
			}
			n = n.Content[j+1]
		case s.key == "" && n.Kind == yaml.SequenceNode && s.index < len(n.Content):
			if last {
				n.Content[s.index] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Content[s.index].Line}
				return
			}
			n = n.Content[s.index]
		default:
			return
		}
	}
}

// mappingIndex is the index in n.Content of key k's key node, or -1.
func mappingIndex(n *yaml.Node, k string) int {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Kind == yaml.ScalarNode && n.Content[j].Value == k {
			return j
		}
	}
	return -1
}

type pathSeg struct {
	key   string // a mapping key, or "" for an index
	index int
}

// splitPath splits "workloads[0].pacer.rate" into workloads, [0], pacer, rate.
func splitPath(path string) []pathSeg {
	var out []pathSeg
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			out = append(out, pathSeg{key: key})
		}
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil || i < 0 {
				return out
			}
			out = append(out, pathSeg{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

var reflectScenario = reflect.TypeFor[Scenario]()

func (o options) lookupOrOS() LookupEnv {
	if o.lookup == nil {
		return osLookup
	}
	return o.lookup
}
