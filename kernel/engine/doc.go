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
// It must not know any provider's wire format, any concrete tool, any
// storage, or how runs are composed into larger workflows: a run is one
// agent with one history.
package engine
