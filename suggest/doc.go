// Package suggest finds the "did you mean" for a mistyped name: the closest of a set of
// known names by edit distance, when it is close enough to be a typo. The scenario loader
// (keys, fault types, enums) and the assertion parser (functions, metrics, outcomes) use it.
//
//	if s := suggest.Closest("decode_crsh", types); s != "" { msg += " (did you mean " + s + "?)" }
package suggest
