// Package scheduler runs many pairs (package orchestrator) inside a host
// process: a bounded FIFO queue, a limit on the pairs that run at once, a
// limit on the model operations in flight across all of them, per-job state
// in an in-memory database (go-memdb), cancellation, and a draining Close
// (O8). A host embeds it with New; it needs no CLI.
//
// # Jobs
//
// Submit queues a job — an *orchestrator.Config — and returns its ID at
// once. A job is queued, then running, then exactly once completed, failed
// or cancelled. A full queue is a *QueueFullError (errors.Is ErrQueueFull);
// Submit never waits for room. The job's pair is built only when the job
// starts, so a queued job costs its state record and nothing more; the
// scheduler keeps the config pointer and never changes the config.
//
// Job state lives in a go-memdb table with one index, by submission
// number: List scans it in order, filtered by state, and the job to start
// next is the first queued one after the last started. A job's state is
// in no key, so a transition rewrites one leaf of one radix tree, where an
// index per state made every transition write two trees and move a key.
// The default IDs spell the submission number, so Get finds a job in the
// same index; a host's own IDs (Config.IDs) add an index by ID. Get, List,
// Wait and Subscribe read snapshots of it; Wait and Subscribe wake on the
// table's watch channels.
//
// Table writes are few and batched, because each memdb write copies the
// radix nodes on its path and each transaction has a fixed cost. Every
// method sees a job once Submit has returned its ID and sees a job running
// once it has started, though both are written behind: Submit only
// appends to a short buffer that a later transaction stores (a slot that
// finds no stored job queued takes its next job from that buffer, and the
// job is then stored only when it ends), and a start is stored with the
// job's end unless a method needs it sooner, which then stores it (List,
// Cancel, Close, Shutdown, a waiting Subscribe) or reads it from the
// buffer (Get, Wait). A job's end is written behind too, into a buffer of
// at most 64 that is stored in one transaction when it is full, when an
// end would make more than Config.Retain finished jobs (the oldest are
// then forgotten before the end is seen), when a slot finds the queue
// empty, or when a method needs it stored; Wait blocks on a per-job
// channel that the end closes. Writers hold the scheduler's own write
// lock, and a slot opens a memdb write transaction only when it writes or
// must look for stored queued jobs, so a job that neither fills a buffer
// nor forgets others costs no transaction of its own. A job's Running and terminal records are each allocated
// with their run and ending. A finished job keeps its record, result and
// pair timeline until about Config.Retain newer jobs have finished.
//
// Each job runs under a context that is a child of the scheduler's, not
// of Submit's, and that only its own Cancel cancels while it plays;
// Shutdown cancels every job's. A slot's jobs share one context until one
// of them is cancelled, which saves a context per job.
//
// # Order and fairness
//
// Jobs start strictly in submission order: a fixed pool of Config.Pairs
// slots takes the queued job with the lowest submission number each time
// one of them is free. Each slot plays its pairs, one at a time, on a
// goroutine that lives as long as the slot, so a pair never grows a fresh
// goroutine stack. Jobs that share a config (the same pointer) play on one
// orchestrator.Team, which lends each pair the workers' engines a finished
// pair gave back; a job whose config names its pair (Config.ID) plays on
// its own (orchestrator.Run). A Config.Started hook hands each pair over.
// There is no preemption and no time slicing: a long pair holds its slot
// until it ends, so short jobs behind it go through the remaining Pairs-1
// slots, and with Pairs = 1 they wait for it. Model
// operations are granted in request order (a FIFO semaphore); a pair runs
// at most one model operation at a time, so a long pair competes with short
// ones operation by operation and cannot take more than one slot.
//
// # Subscribe
//
// Subscribe on a job that is still queued waits, under its context, until
// the job starts, then returns a cursor over the pair timeline; a job that
// ended without a pair (cancelled while queued, or a config the orchestrator
// refused) gives ErrNoTimeline.
//
// # Shutting down
//
// Close refuses new jobs and waits until every queued and running job has
// ended; Shutdown also cancels them: queued jobs end cancelled without
// starting, running pairs are cancelled. When either returns nil, every
// pair has ended and every goroutine of the pool has returned.
//
// The package knows pairs only through the orchestrator's public API. It
// must not reach into the kernel's engine, know any provider's wire format,
// or change what a pair does: its model-operation limit is a model.Provider
// decorator around each worker's provider, outside the kernel.
package scheduler
