// Package scripted owns an offline model.Provider that answers from a
// script instead of a network model: for demos, tests and the CLI's default
// writer/reviewer run, with no credentials and no network.
//
// A Script is a list of Steps. Each step is one model operation's answer:
// optional text, optional tool calls, and usage. A step may carry a Match
// rule on the last user message, so one script can answer a first request
// and a revision request differently.
//
// # Selection rule
//
// The provider keeps no state between calls: it derives its position from
// the request alone, so it is deterministic and safe for concurrent use, and
// a new run of the same script starts over.
//
//  1. The input is the text of the request's most recent user message.
//  2. k is the number of assistant messages after that user message, that
//     is, how many model operations this run already had for this input.
//  3. The candidates are the steps whose Match accepts the input, in script
//     order; a step without Match accepts every input.
//  4. The operation answers with candidate k. If there is none, the stream
//     is one Failed item with problem code "script_exhausted".
//
// So a run of [call fs.write, answer] works: the first operation (k=0)
// emits the call, the engine appends the assistant message and the tool
// results, and the second operation (k=1) emits the answer. A later run
// whose user message contains "Reviewer feedback" counts from zero again
// over the steps that match its new input.
//
// # Match grammar
//
//	""           every input
//	"re:EXPR"    the RE2 regular expression EXPR matches somewhere
//	"text:S"     the input contains S (use it when S starts with a prefix)
//	"not:M"      M (one of the forms above, not "not:") does not match
//	"S"          the input contains S
//
// Matching is case-sensitive; a regular expression may use (?i).
//
// # Streams
//
// A step's text is split into at most MaxDeltas text deltas at word
// boundaries (longer pieces are cut to bound.MaxTextDeltaBytes), followed by
// one tool-call item per call and a Completed item with the step's usage.
// Call IDs derive from the operation ID ("op-7-c1", "op-7-c2"), so two runs
// with the same IDs produce the same items. Recv returns the context's
// error once the Stream context is done. A step that calls a tool the
// request does not offer fails with problem code "tool_not_offered": a
// script that names tools nobody wired is a configuration mistake, and an
// early, named failure beats a run that limps on.
//
// This package names tools only by their names; it must not import any
// tool implementation, another provider, or anything above the kernel. It
// knows nothing about how runs are composed: a script is one model.
package scripted
