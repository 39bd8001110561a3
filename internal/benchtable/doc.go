// Package benchtable is `make bench`: it runs the benchmarks behind the project's
// performance figures (issue 11 and later), reads the standard `go test -bench` output,
// and renders one table of figure, goal, measured value and PASS/MISS.
//
// The figures and their goals are declared in one list, Benchmarks (figures.go). Each
// benchmark runs once, in its own `go test` process, with its own -benchtime and an
// overall timeout; a benchmark that is missing, skipped, failed, timed out or did not
// report its metric shows as MISS with the reason, never silently dropped.
//
// Parse reads the benchmark line format (`BenchmarkName-N  iters  value unit  value
// unit ...`) and the lines around it that say which package a line belongs to and why a
// benchmark or package failed. Evaluate matches the figures against a parsed Output,
// and Markdown renders the table.
package benchtable
