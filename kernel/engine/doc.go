// Package engine owns the deterministic single-agent state machine: one
// run is a loop of turns, each turn one model operation followed by the tool
// calls it asked for, until the model answers without tool calls or the run
// reaches its maximum turns (K22).
//
// Every part the engine talks to is injected through Config: the model
// provider, the plan source, the ID source, the clock, the interaction
// broker and the observers (K21). The engine owns sequencing, cancellation
// (K24), panic containment (K25), exactly-once terminal finalization (K26),
// draining (K27), interactions (K28) and snapshots (K29).
//
// # Contexts
//
// A run uses five contexts, each for one reason:
//
//   - The caller's context, given to Start or Run. The run lives under it:
//     its deadline and values reach the run, and its end cancels the run.
//     Leasing the plan uses it too.
//   - The run's context: context.WithCancelCause of the caller's, also
//     cancelled by Run.Cancel, by Shutdown and at the run's end. Providers,
//     tools and the interaction broker get it, and only its state decides
//     whether the run was cancelled (K8, K24).
//   - The append context: context.WithoutCancel of the caller's, the
//     run's values without its cancellation. Events the run decided to
//     write are written with it even after a cancel, so a cancelled run
//     still writes its terminals (K24, K26). A lease's release uses it,
//     since a lease bounds its own release (K14). A run without observers
//     uses context.Background instead: nothing it writes can block, and
//     its lease's release then sees none of the caller's values
//     (appendContext).
//   - The observer bound: a deadline of FinalizeTimeout on the append
//     context, given to required observers with each ordinary event, so an
//     observer may apply backpressure but cannot hold the run forever
//     (K17). One bound serves many events and is renewed once half spent.
//   - The finalization context: context.WithTimeout of the append context,
//     made when the loop ends, under which the open lifecycles are closed,
//     the run terminal is written and the log is closed (K26). Without
//     observers nothing there can block, and it is the append context.
//
// Close drains (it waits for active runs) and Shutdown cancels them: the
// reverse of net/http's naming, as contract K27 names them.
//
// It must not know any provider's wire format, any concrete tool, any
// storage, or how runs are composed into larger workflows: a run is one
// agent with one history.
package engine
