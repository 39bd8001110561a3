// Package ledger is the vocabulary of a run's record, events.jsonl: one JSON line per
// event (Event), the outcome taxonomy (Outcome), where a silent drop happened (Phase),
// and the reader and writer of the file. The client classifies into it, chaos and the
// harness write it, and reports judges it; nothing here judges anything.
// The writer encodes lines without reflection (append.go: encoding/json's exact bytes,
// which nested and raw fields still go through), since the harness writes 4-5 a request.
//
//	w, _ := ledger.Create(dir+"/"+ledger.EventsFile, onEvent) // safe for concurrent Emit
//	w.Emit(ledger.Event{Type: ledger.EventScheduled, RequestID: id, ...})
//	w.Close()                                                  // flushes; later emits are dropped
//
//	ledger.Read(f, func(e ledger.Event) error { ...; return nil }) // streams; a torn last line is skipped
//	ledger.ReadParallel(f, fn) // the same, decoding on every core (whole-file reports)
package ledger
