package reports

// Span is a shaded X range with a label at its top.
type Span struct {
	From, To float64
	Label    string
}
