// Package gen is the contract between the HTTP front end (server/api) and whatever
// produces tokens: a local engine (colocated, prefill or decode role) or the PD router.
//
// The front end tokenizes, builds a Request and calls Generate; it then ranges over the
// returned channel until the Done event:
//
//	ch, err := g.Generate(ctx, req) // err wraps ErrOverloaded, ErrInvalid, ...
//	for ev := range ch { write(ev.Tokens); if ev.Done { finish(ev) } }
//
// Sentinel errors carry meaning; only server/api maps them to HTTP status codes.
package gen
