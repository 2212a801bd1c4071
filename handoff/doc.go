// Package handoff owns the pure step between two workers: it turns a
// finished run's final answer into the one ordinary user message the next
// worker starts from (O3), and records where that message came from.
//
// A Policy says how the message is framed ("Task: … / Reviewer feedback:
// …"), how large it may be and what happens to content over that bound
// (Reject, or Cut with a visible marker), and which line of an answer means
// approval (the done marker). Build copies only the final answer's text:
// never the other worker's history, tool calls, tool results or reasoning.
// Its Provenance (from worker, run ID, last sequence, SHA-256 and size of
// the content) is kept beside the message, never inside it.
//
// Everything here is a pure function of its inputs: no clock, no IDs, no
// I/O, no goroutines. The package must not know how workers run, how a
// pair is scheduled or terminated, or where provenance is recorded; the
// orchestrator decides that.
package handoff
