// Package orchestrator owns the pair: two workers, each with its own kernel
// engine, cooperating through ordinary user messages under one leased tool
// plan (O1–O7). The kernel is none the wiser: every run is an ordinary
// single-agent run.
//
// A pair leases the current plan once, starts every run of both workers on
// exactly that plan ID (engine.Input.Plan), and releases its lease exactly
// once after the last run (O2). It follows a pattern — Relay (first worker,
// then second, once) or ReviewLoop (first, second, first with the second's
// feedback, ... until the second approves or a limit is hit) — written as
// plain Go in patterns.go (O4). Between runs, package handoff turns a final
// answer into the next worker's one user message, and the pair records the
// provenance in its timeline, never in a kernel message (O3).
//
// A pair ends exactly once with a typed Reason (O5): completed, approved,
// max rounds, budget exhausted (tokens, tool calls or wall time summed over
// both workers), loop detected, worker failed, handoff rejected, cancelled
// (O6), or an infrastructure failure of its timeline or lease. Budgets are
// enforced from outside the kernel: a provider decorator refuses model
// operations once the token budget is spent and stops the pair at the first
// tool call over the tool-call budget; a timer stops it at the wall-time
// budget.
//
// With Config.OnLimit AnswerAtLimit, a pair that max rounds or a budget
// ends first gives the worker holding the latest draft one more run for
// its best final answer (finalanswer.go): an ordinary kernel run on an
// engine built from that worker's config with an empty plan, so that its
// one model operation is offered no tool. This run alone does not use the
// pair's plan. The pattern may spend only what the reserve leaves of the
// token and wall-time budgets; the final answer gets the rest. The pair
// still ends with the limit's reason; cancellation and a failed worker
// never ask for a final answer.
//
// The pair timeline (O7) is a kernel eventlog.Log of its own with the same
// gap-free Subscribe as a run log. Its kinds are defined here: pair.started,
// pair.handoff, pair.final_answer, and one of pair.completed, pair.failed,
// pair.cancelled; in between, every worker run event is relayed under its
// kernel kind with the worker, run ID and run sequence (Relayed). schema.go
// names the schema once, for every reader of a timeline's JSON. Delivery
// Live relays each event as its run commits it, through a required
// observer on the worker's engine; AfterRun copies a run's events as soon as it ends, which keeps the
// engines free of observers. Both write the same timeline.
//
// Every run lives under the caller's context, so it sees the caller's
// deadline and values, and the caller's cancellation cancels it at once. The
// pair's own stops (Cancel, a budget) shut both workers' engines down,
// which cancels the active run (K24) and refuses any later one; a run's
// context is never derived from a context of the pair's.
//
// Pair keeps what a reader needs to follow a pair: its settings, its crew,
// its lease, its timeline (relay.go: the log, how pair events are written,
// and relayMemory, the one place that economizes on relayed events' memory),
// its stop state (stop.go), its meter (budget.go) and its progress and
// result.
//
// A Team plays many pairs of one Config, reusing the workers' engines: each
// pair borrows a crew (its two workers) for its whole life and gives it back
// when it ends, so no two pairs run on one engine at once (O1), and a host
// that plays the same two workers task after task does not build two
// engines per pair. A pair's stop shuts its crew's engines down, and the
// Team closes that crew instead of lending it again; a stop after the pair
// has ended reaches nothing.
//
// Every tool call of a pair carries its idempotency key (package
// idempotency: derived from the pair, run and call IDs) on the call's
// context, and under an approval policy (Config.Approval) it runs behind
// the kernel's guard mechanism with a guard that asks before the call runs:
// the question goes through the worker engine's interaction broker, so it
// and its end are run events in the pair timeline, and its answer is bound
// to a digest of the exact call (CallDigest). Approvals is a broker that
// holds such questions for an answer by pair, question ID and digest. Both
// live in approval*.go; the plan each worker's engine leases keeps the pair
// plan's ID and definitions, so its identity is unchanged.
//
// Resume (resume.go) continues a pair whose process ended mid-pair, from
// its recorded timeline and the same Config: it leases the exact recorded
// plan, walks past the completed runs and recorded handoffs, and restarts
// the interrupted run with its recorded model outputs and tool outcomes
// served again (resume_replay.go), so nothing with a recorded outcome is
// done twice; an uncertain mutating call refuses the resume unless it is
// accepted or its tool is idempotent. TimelineConfig.Journal records the
// model outputs it serves (pair.model_output); a resumed timeline goes on
// after pair.resumed. It reads records; where they come from (a store, a
// job queue) is the host's.
//
// Run plays the whole pair on the calling goroutine, each worker run with
// engine.Engine.Run, so a pair costs no goroutine hand-off; Start plays it on
// a goroutine of its own. Config.Started hands the pair to other goroutines
// (to Subscribe or Cancel) while Run plays it: a host that keeps its own
// goroutines for pairs, such as the scheduler, uses Run with it.
//
// The package must not reach into the kernel's internals or ask it for
// anything a single-agent run does not already offer; it knows nothing of
// queues or of limits across pairs (the scheduler's) beyond what a Team
// and the Approvals broker keep of the pairs they serve, nor of any
// provider's wire format or concrete tool.
package orchestrator
