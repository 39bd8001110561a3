// Package jsonnum writes a float64 exactly as encoding/json does, for the hand-written
// encoders on hot paths (server/gen's worker request and chunk codecs, the ledger's event
// appender), so the rule exists once.
//
//	b = jsonnum.AppendFloat(b, 0.7) // "0.7", as json.Marshal(0.7)
package jsonnum
