// Package tool owns the contract between the engine and executable tools:
// definitions with explicit effect and replay safety (K4), canonical
// capability sets and definition fingerprints (K5), calls, results,
// model-visible problems, progress, typed execution errors (K7, K8), the one
// canonical Dispatcher that every call goes through (K6, K9), and guards that
// may deny or observe a call but never rewrite its outcome (K10).
//
// It must not know about providers, messages, plans, events or any concrete
// tool: a tool is any value with a Definition and an Execute method.
package tool
