package scenarios

import (
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LookupEnv finds an environment variable; os.LookupEnv is the default. Tests and
// `harness validate` with a given environment pass their own.
type LookupEnv func(name string) (string, bool)

// EnvVar is one environment variable a scenario used, as expanded.
type EnvVar struct {
	Name    string
	Value   string
	Default bool // the variable was unset (or empty) and the ${NAME:-default} default was used
	Line    int  // first line that used it
	// Secret: the value went into a header; outputs show it redacted.
	Secret bool
}

// ExpandError is a problem with one ${...} reference: a variable without a default that
// is not set, or a malformed reference.
type ExpandError struct {
	Var string // the variable's name; empty for a malformed reference
	Msg string
}

func (e *ExpandError) Error() string { return "scenarios: " + e.Msg }

// Expand replaces ${NAME} and ${NAME:-default} in s with the environment's values, and
// $$ with a single $. A $ followed by anything else is kept as written, so shell
// snippets such as "$HOME" pass through untouched. ${NAME:-default} takes the default
// when NAME is unset or empty, as the shell does; the default is literal text (no
// nesting, no '}'). used receives each variable referenced, in order.
func Expand(s string, lookup LookupEnv, used func(EnvVar)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", &ExpandError{Msg: fmt.Sprintf("unterminated ${ in %q (write $$ for a literal $)", clip(s))}
		}
		ref := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", &ExpandError{Msg: fmt.Sprintf("${%s}: %q is not a variable name (letters, digits, '_'; not starting with a digit)", clip(ref), clip(name))}
		}
		v, ok := lookup(name)
		usedDef := false
		switch {
		case hasDef && (!ok || v == ""):
			v, usedDef = def, true
		case !ok:
			return "", &ExpandError{Var: name, Msg: fmt.Sprintf("environment variable %s is not set (it has no default; set it, or write ${%s:-default})", name, name)}
		}
		if used != nil {
			used(EnvVar{Name: name, Value: v, Default: usedDef})
		}
		b.WriteString(v)
		i += 2 + end + 1
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// expandNodes expands every string scalar value of the tree in place (mapping keys are
// left alone: they are field names). A scalar that changed is re-resolved, quoted or
// not, so `port: ${PORT:-30000}` is an integer and `stream: "${STREAM:-true}"` a
// boolean (a string field takes either); only an explicit !!str tag keeps it a string.
// Each node is expanded once, however many aliases reach it. Problems carry the line of
// the value.
func expandNodes(file string, root *yaml.Node, lookup LookupEnv) ([]EnvVar, Problems) {
	var (
		probs Problems
		vars  []EnvVar
		seen  = map[*yaml.Node]bool{}
		index = map[string]int{}
	)
	var walk func(n *yaml.Node, isKey bool, depth int)
	walk = func(n *yaml.Node, isKey bool, depth int) {
		if n == nil || seen[n] || depth > 64 {
			return
		}
		seen[n] = true
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, false, depth+1)
			}
		case yaml.MappingNode:
			for i, c := range n.Content {
				walk(c, i%2 == 0, depth+1)
			}
		case yaml.AliasNode:
			walk(n.Alias, isKey, depth+1)
		case yaml.ScalarNode:
			if isKey || n.ShortTag() != "!!str" || !strings.Contains(n.Value, "$") {
				return
			}
			line := n.Line
			v, err := Expand(n.Value, lookup, func(e EnvVar) {
				if _, ok := index[e.Name]; ok {
					return
				}
				e.Line = line
				index[e.Name] = len(vars)
				vars = append(vars, e)
			})
			if err != nil {
				msg := err.Error()
				if ee, ok := err.(*ExpandError); ok {
					msg = ee.Msg
				}
				probs = append(probs, Problem{File: file, Line: line, Msg: msg})
				return
			}
			if v != n.Value {
				n.Value = v
				if n.Style&yaml.TaggedStyle == 0 {
					// Re-resolve: an expansion may be a number or a boolean, and a
					// reference in a flow mapping ({count: "${N:-3}"}) has to be quoted.
					n.Style, n.Tag = 0, ""
				}
			}
		}
	}
	walk(root, false, 0)
	return vars, probs
}

// osLookup is the default LookupEnv.
var osLookup LookupEnv = os.LookupEnv

// SplitWords splits a command line into words as a POSIX shell would without expanding
// anything: blanks separate words, '...' keeps everything literally, "..." keeps blanks
// (a backslash escapes ", \\ and $ inside it), and a backslash outside quotes escapes the
// next character.
func SplitWords(s string) ([]string, error) {
	var (
		out  []string
		cur  strings.Builder
		word bool // cur holds a word (possibly empty, from "")
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if word {
				out = append(out, cur.String())
				cur.Reset()
				word = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("scenarios: unterminated ' in %q", clip(s))
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			word = true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte(`"\\$`, s[j+1]) >= 0 {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("scenarios: unterminated \" in %q", clip(s))
			}
			i = j
			word = true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			word = true
		default:
			cur.WriteByte(c)
			word = true
		}
	}
	if word {
		out = append(out, cur.String())
	}
	return out, nil
}

// Argv is the process's whole command line: Launcher's words, Command, ExtraArgs' words.
func (l Launch) Argv() ([]string, error) {
	pre, err := SplitWords(l.Launcher)
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	post, err := SplitWords(l.ExtraArgs)
	if err != nil {
		return nil, fmt.Errorf("extra_args: %w", err)
	}
	argv := append(append(pre, l.Command...), post...)
	return argv, nil
}
