// Package tool owns the contract between the engine and executable tools:
// definitions with explicit effect and replay safety (K4), canonical
// capability sets and definition fingerprints (K5), calls, results,
// model-visible problems, progress, typed execution errors (K7, K8), the one
// canonical Dispatcher that every call goes through (K6, K9), and guards that
// may deny or observe a call but never rewrite its outcome (K10).
//
// The rules the dispatcher enforces, in one place:
//
//   - A tool returns a valid Result for its call, or a zero Result and one
//     direct *ExecutionError for its call. Anything else (untyped, wrapped or
//     joined errors, a result with an error, an empty outcome, another call's
//     ID, a hand-made ExecutionError, unsafe retry advice, an uncertain
//     outcome from a read-only tool) is replaced by the dispatcher's own
//     *ExecutionError with problem code "tool_protocol_violation" and a
//     *ProtocolError cause. A panic becomes "tool_panic" with cause ErrPanic.
//     Both are Uncertain for a mutating tool (it may have half-happened),
//     Definitive for a read-only one, and never retry.
//   - Retry advice is allowed only on a Definitive outcome of a Safe or
//     Idempotent tool.
//   - A valid Result wins over a cancellation that races with it. Whether a
//     run was cancelled is decided by the engine from the run's own context,
//     never from an error: a tool's error matching context.Canceled while the
//     run's context is active is an ordinary failure.
//   - The Reporter a tool receives forwards only its own call's progress and
//     only until Execute returns. If the caller's Reporter failed and the
//     outcome is an execution error, Dispatch returns a *DispatchFailure
//     whose Unwrap reaches only the execution error.
//   - A guard's denial is a model-visible problem Result (the model can
//     adapt); a guard's panic or zero Decision fails the call closed with a
//     Definitive execution error. After hooks see a detached Observation of
//     an outcome that was captured before they ran.
//
// It must not know about providers, messages, plans, events or any concrete
// tool: a tool is any value with a Definition and an Execute method.
package tool
