// Package workers owns the worker: a role name ("writer", "reviewer"), one
// kernel engine of its own and the definition its runs use (system prompt,
// model, maximum turns) (O1).
//
// A worker is a thin, immutable binding. Its engine is independent: a run
// of one worker never sees the history of another worker's runs, because
// each run starts from one input message and the engine keeps no state
// between runs. Two workers may be built on the same plan source and still
// have their own providers, ID sources, observers and limits.
//
// The package knows only the kernel. It must not know about pairs,
// handoffs, patterns, budgets or timelines: the orchestrator composes
// workers, and decorates what it passes in (provider, observers) itself.
package workers
