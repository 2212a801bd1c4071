// Package scheduler runs many pairs (package orchestrator) inside one host
// process: the simple, in-process job backend (O8). A host embeds it with
// New; it needs no CLI.
//
// It owns, under one mutex:
//
//   - the jobs: one map from job ID to job, holding every queued, running
//     and kept finished job, each with its own context (from its start)
//     and a done channel that its end closes;
//   - the queue: one FIFO of queued jobs, which Config.Pairs slot
//     goroutines take in submission order; a job cancelled while queued
//     ends at once and is passed over;
//   - the read model: a go-memdb table of job snapshots indexed by state
//     and submission order, written in the same critical section as each
//     transition (submit, start, end, forget) and read by List without
//     the mutex. It never decides what a job does;
//   - the limits: Config.Queue queued jobs (Submit never waits: a full
//     queue is a *QueueFullError), Config.Pairs running pairs,
//     Config.ModelOps model operations in flight across all pairs (a FIFO
//     semaphore around each worker's provider), and Config.Retain finished
//     jobs kept, the oldest forgotten first.
//
// A job is queued, then running, then exactly once completed, failed or
// cancelled (package job spells the states and the Backend interface that
// Jobs returns). Jobs sharing a config pointer play on one
// orchestrator.Team, kept for at most Pairs+8 configs; a config that
// names its pair plays alone. Subscribe
// waits for a queued job to start and returns its pair's gap-free
// timeline cursor. Close drains; Shutdown cancels the queued and running
// jobs; when either returns nil every pair and slot goroutine has ended.
//
// It knows pairs through the orchestrator's public API. Its one reach
// below that is Config.ModelOps: it wraps the model.Provider of each
// worker's engine configuration in a gate that waits for a free slot, and
// a wait longer than Config.ModelWait fails the operation with a
// retryable *model.ProviderError; otherwise it never changes what a pair
// does. Of the kernel's engine it uses only the Clock type. It must not
// know how the engine runs a turn, a provider's wire format, a transport
// or a store.
package scheduler
