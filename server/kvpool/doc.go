// Package kvpool is the paged KV-cache allocator of one worker: a fixed number of pages
// of PageSize tokens each, handed out to owners (requests) and given back.
//
// The pool is pure data with no locks: the scheduler owns it and is the only caller.
// Every page records its owner, so a page can never be handed to two requests at once
// and a free of a page the caller does not own is an error instead of silent corruption.
//
//	p := kvpool.New(pages)
//	got, ok := p.Alloc(owner, p.PagesFor(tokens)) // ok=false: not enough free pages
//	...
//	err := p.Free(owner, got)                     // error: double free or wrong owner
//
// Capacity sizes the pool the way SGLang does: from --max-total-tokens, or from
// --mem-fraction-static × --device-memory-gb ÷ KV bytes per token, divided by the page size.
package kvpool
