package scenarios

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with a scenario, located by file, line and field path.
type Problem struct {
	File string // as given to Load, or the embedded file name
	Line int    // 1-based; 0 when unknown
	Path string // field path, e.g. "workloads[0].agents"; empty for the whole file
	Msg  string
}

// String formats the problem as "file:line: path: message".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a scenario. It is the error Load, Parse and Validate
// return for a bad scenario; use errors.As to get at the individual problems.
type Problems []Problem

func (ps Problems) Error() string {
	var b strings.Builder
	if len(ps) == 1 {
		b.WriteString("scenarios: invalid scenario: ")
	} else {
		fmt.Fprintf(&b, "scenarios: invalid scenario (%d problems):\n", len(ps))
	}
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Lines returns one "file:line: path: message" string per problem.
func (ps Problems) Lines() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func (ps Problems) sorted() Problems {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
	return ps
}

// Summary counts the problems with the right plural: "1 problem", "32 problems".
func (ps Problems) Summary() string { return plural(len(ps), "problem") }
