package benchtable

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// Document writes bench.md: the table, how many figures meet their goal, and what
// machine and command measured them.
func Document(w io.Writer, rows []Row, m Machine, command string, when time.Time) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Measured %s by `%s` on %s.\n\n", when.UTC().Format("2006-01-02 15:04 MST"), command, m)
	if err := Markdown(&b, rows); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n\n%s\n", Summary(rows), Legend)
	_, err := w.Write(b.Bytes())
	return err
}

// Legend says how to read the table's columns.
const Legend = "The median decides PASS; the spread is the lowest and highest value over the runs " +
	"(each run a process of its own). A run is under load when the rest of the machine used more " +
	"than a quarter of its CPUs while it lasted (/proc/stat busy time less the benchmark's own " +
	"processes; where unknown, a load average above half the CPU count at its start): the load " +
	"average alone also counts the benchmark's own threads, and the previous benchmark's for a minute."

// Markers delimit the part of a document (docs/BENCHMARKS.md) that ReplaceSection
// rewrites.
const (
	BeginMarker = "<!-- benchtable:begin -->"
	EndMarker   = "<!-- benchtable:end -->"
)

// ReplaceSection returns doc with the text between BeginMarker and EndMarker replaced
// by section. Both markers must be there, once each, in that order.
func ReplaceSection(doc, section []byte) ([]byte, error) {
	begin, end := []byte(BeginMarker), []byte(EndMarker)
	i, j := bytes.Index(doc, begin), bytes.Index(doc, end)
	switch {
	case i < 0 || j < 0:
		return nil, fmt.Errorf("benchtable: the document lacks the %s and %s lines", BeginMarker, EndMarker)
	case j < i || bytes.Count(doc, begin) != 1 || bytes.Count(doc, end) != 1:
		return nil, fmt.Errorf("benchtable: the document needs one %s, then one %s", BeginMarker, EndMarker)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(begin)])
	out.WriteString("\n")
	out.Write(bytes.TrimSpace(section))
	out.WriteString("\n")
	out.Write(doc[j:])
	return out.Bytes(), nil
}
