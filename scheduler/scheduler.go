package scheduler

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Job is one unit of work: a pair to run.
type Job struct {
	// Pair configures the job's pair. The scheduler keeps the pointer, not
	// a copy, and reads the config when the job starts: it must not change
	// after Submit. Many jobs may share one config. An empty Pair.ID
	// becomes the job ID; the scheduler never writes to the config. The
	// orchestrator validates the config when the job starts: a config it
	// refuses fails the job (Info.Err).
	Pair *orchestrator.Config
}

// Scheduler runs jobs (O8). Its methods are safe for concurrent use. New
// starts its goroutine pool; Close or Shutdown stops it.
type Scheduler struct {
	cfg Config
	// ownIDs: the IDs come from the default source, idPrefix and the
	// submission number, which never repeat within a scheduler: Submit
	// need not look them up, and the table finds a job by the number
	// its ID spells (seqOf).
	ownIDs   bool
	idPrefix string
	db       *memdb.MemDB
	wmu      sync.Mutex // the table's write lock (txn.go)
	w        writeLock  // guarded by wmu
	slots    *slots     // the model-operation limit; nil without one

	// Submit appends to pending under mu; a later write transaction
	// stores it (drain): a pool goroutine's once the stored queue is
	// empty, Submit's own once maxPending are waiting, or one of a call
	// that needs it stored (flush, sync). So a submission costs no
	// transaction of its own, and pending jobs share the nodes their
	// transaction copies. Lock order: the table's write lock, then mu.
	mu       sync.Mutex
	seq      uint64    // guarded by mu
	pending  []*record // guarded by mu; in submission order
	draining []*record // guarded by mu; the batch a transaction is storing
	spare    []*record // guarded by mu; a free pending array
	closed   bool      // guarded by mu
	// unstoredIDs indexes pending and draining by job ID; a draining
	// job that starts or is cancelled before its drain lets go of it
	// leaves at once (dropUnstored).
	unstoredIDs map[string]*record // guarded by mu
	// unsynced counts submissions not yet committed to the table; it
	// drops only after the commit, so zero means every job Submit has
	// returned is visible to a read transaction.
	unsynced atomic.Int64
	// moves counts the batches that left pending or draining; written
	// under mu.
	moves atomic.Uint64

	// A job's start is written behind: its Running record waits in
	// starts until its terminal record replaces it in the table (one
	// write instead of two) or a read needs it stored (syncStarts). A
	// stored Queued record numbered at most started is thus running;
	// watch reads such a job's record from starts.
	starts map[string]*record // guarded by mu
	// A job's end is written behind too: its terminal record waits in
	// ends (and endOrder, in the order the jobs ended) until a batch of
	// them is stored (syncEnds), and stays in ends until that commit.
	// waits holds the channels that Wait calls block on for a job's end,
	// closed when it is written behind or stored.
	ends     map[string]*record       // guarded by mu
	endOrder []*record                // guarded by mu
	waits    map[string]chan struct{} // guarded by mu
	// storing holds the records a transaction is storing that are in
	// neither the table nor starts nor ends until its commit.
	storing map[string]*record // guarded by mu
	// buffered counts the starts and ends not yet committed; it drops
	// after the commit.
	buffered atomic.Int64
	started  atomic.Uint64 // the last started submission number; written under the write lock
	// waiters counts Subscribe calls, which may wait on a queued record
	// for the job's start: while there are any, starts are stored at once.
	waiters atomic.Int64

	finished finishedQueue // guarded by the table's write lock
	// writes counts the table writes, lastQueued is the submission
	// number of the last job stored queued; both guarded by the table's
	// write lock.
	writes     uint64
	lastQueued uint64
	// skipped is the highest submission number that nextQueued passed
	// over as cancelled while queued; guarded by the write lock.
	skipped uint64
	counts  counters

	wake     chan struct{} // a job was queued
	quit     chan struct{} // closed by Close or Shutdown
	quitOnce sync.Once

	base       context.Context // parent of every job's context
	cancelBase context.CancelFunc
	live       atomic.Int32  // pool goroutines still running
	poolDone   chan struct{} // closed by the last one
	teams      *teams        // the Teams jobs play on
}

type counters struct {
	queued, running, retained    atomic.Int64
	submitted, rejected          atomic.Uint64
	completed, failed, cancelled atomic.Uint64
}

// New validates cfg and starts a scheduler with its pool of cfg.Pairs
// slots, one goroutine each, which wait for jobs until Close or Shutdown.
func New(cfg Config) (*Scheduler, error) {
	ownIDs := cfg.IDs == nil
	var prefix string
	if ownIDs {
		prefix = randomPrefix()
		cfg.IDs = Sequential(prefix)
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	db, err := memdb.NewMemDB(newSchema(!ownIDs))
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:         cfg,
		ownIDs:      ownIDs,
		idPrefix:    prefix,
		db:          db,
		starts:      make(map[string]*record, cfg.Pairs),
		ends:        make(map[string]*record, min(maxEnds, cfg.Retain)+1),
		waits:       make(map[string]chan struct{}),
		storing:     make(map[string]*record),
		unstoredIDs: make(map[string]*record),
		wake:        make(chan struct{}, cfg.Pairs),
		quit:        make(chan struct{}),
		poolDone:    make(chan struct{}),
	}
	s.teams = newTeams(s)
	if cfg.ModelOps > 0 {
		s.slots = newSlots(cfg.ModelOps, cfg.ModelWait)
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.live.Store(int32(cfg.Pairs))
	for range cfg.Pairs {
		go s.serve()
	}
	return s, nil
}

// Submit queues job and returns its ID at once. It never waits: a full
// queue is a *QueueFullError, a closed scheduler ErrClosed. ctx bounds only
// the submission; the job lives under the scheduler (Cancel, Shutdown).
// The job is visible to every other method as soon as Submit returns.
func (s *Scheduler) Submit(ctx context.Context, job Job) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if job.Pair == nil {
		return "", bound.Missing("job.pair")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", ErrClosed
	}
	if s.counts.queued.Load() >= int64(s.cfg.Queue) {
		s.mu.Unlock()
		s.counts.rejected.Add(1)
		return "", &QueueFullError{Limit: s.cfg.Queue}
	}
	seq := s.seq + 1
	jobID, err := s.newID(seq)
	if err == nil && !s.ownIDs && s.inUse(jobID) {
		err = bound.Conflicting("scheduler.ids", "the ID source returned an ID in use")
	}
	if err != nil {
		s.mu.Unlock()
		return "", err
	}
	s.seq = seq
	s.pending = append(s.pending, &record{id: jobID, seq: seq, state: Queued, submitted: s.now(), cfg: job.Pair})
	s.unstoredIDs[jobID] = s.pending[len(s.pending)-1]
	s.unsynced.Add(1)
	s.counts.queued.Add(1)
	s.counts.submitted.Add(1)
	full := len(s.pending) >= maxPending
	s.mu.Unlock()
	if full {
		s.flush() // no pool goroutine is taking them: keep the buffer short
	}
	select {
	case s.wake <- struct{}{}:
	default: // enough wake-ups are pending already
	}
	return jobID, nil
}

// Get returns a snapshot of the job.
func (s *Scheduler) Get(jobID string) (Info, error) {
	_, r := s.watch(jobID)
	if r == nil {
		return Info{}, ErrNotFound
	}
	return r.info(), nil
}

// List yields the jobs in state, or every job for state 0, in submission
// order, from one snapshot taken when List is called.
func (s *Scheduler) List(state State) iter.Seq[Info] {
	s.flush()
	// One scan in submission order, filtered by state: at most Queue +
	// Retain records, and no index per state to keep up on every write.
	it, err := s.db.Txn(false).LowerBound(table, indexID, uint64(0))
	return func(yield func(Info) bool) {
		if err != nil {
			return
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if r := raw.(*record); (state == 0 || r.state == state) && !yield(r.info()) {
				return
			}
		}
	}
}

// Wait blocks until the job has ended and returns its final snapshot, or
// until ctx is done (ctx.Err(), and the job carries on). Its error is
// about the waiting — ErrNotFound or ctx's error; the job's own outcome is
// Info.State and Info.Err. A job that has already ended is returned even
// when ctx is done.
func (s *Scheduler) Wait(ctx context.Context, jobID string) (Info, error) {
	for {
		ch, r := s.watch(jobID)
		if r == nil {
			return Info{}, ErrNotFound
		}
		if r.state.Terminal() {
			return r.info(), nil
		}
		// Its end may be written behind after watch read it: look
		// again under mu, which finish holds to wake waits.
		s.mu.Lock()
		if e := s.ends[jobID]; e != nil {
			s.mu.Unlock()
			return e.info(), nil
		}
		if ch == nil && s.starts[jobID] == nil && s.unstoredIDs[jobID] == nil && s.storing[jobID] == nil {
			// Read from a buffer it has left since, and no table
			// channel to wake on: its end may have been woken
			// already. Look again.
			s.mu.Unlock()
			continue
		}
		done := s.waits[jobID]
		if done == nil {
			done = make(chan struct{})
			s.waits[jobID] = done
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-done:
		case <-ctx.Done():
			return Info{}, ctx.Err()
		}
	}
}

// Cancel cancels a job. A queued job ends cancelled at once and never
// starts; a running job's pair is cancelled and the job ends cancelled
// (unless its pair ended first); Wait reports the end. Cancelling a job
// that has ended does nothing.
func (s *Scheduler) Cancel(jobID string) error {
	_, r := s.watch(jobID)
	if r == nil {
		return ErrNotFound
	}
	switch r.state {
	case Running:
		r.run.cancel()
		return nil
	case Queued:
	default:
		return nil
	}
	// End the queued job, unless a pool goroutine started it meanwhile;
	// contexts are cancelled after the commit, outside the write lock.
	var started *run
	s.lock()
	s.drain() // it may be pending
	s.syncStarts()
	s.syncEnds() // an ended job must not be cancelled as queued
	if _, q := s.first(s.write(), jobID); q != nil {
		switch q.state {
		case Queued:
			s.cancelQueued(q)
		case Running:
			started = q.run
		}
	}
	s.unlock()
	if started != nil {
		started.cancel()
	}
	return nil
}

// Subscribe returns a cursor over the job's pair timeline after afterSeq,
// with the pair's gap-free replay-then-tail contract (O7). For a job still
// queued it waits, under ctx, until the job starts. A job that ended
// without a pair gives ErrNoTimeline.
func (s *Scheduler) Subscribe(ctx context.Context, jobID string, afterSeq uint64) (*eventlog.Subscription, error) {
	// Before the first read: a start the read misses is then stored at
	// once, and wakes the wait on the queued record.
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	for {
		ch, r := s.watch(jobID)
		if r == nil {
			return nil, ErrNotFound
		}
		if r.state == Queued {
			if ch == nil { // pending: store it, to watch its record
				s.sync()
				continue
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if r.run == nil {
			return nil, ErrNoTimeline
		}
		select {
		case <-r.run.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.run.pair == nil {
			return nil, ErrNoTimeline
		}
		return r.run.pair.Subscribe(ctx, afterSeq)
	}
}

// Stats reports the scheduler's gauges and counters.
type Stats struct {
	Queued, Running int // jobs now
	Retained        int // finished jobs kept (Config.Retain)
	// Submitted counts accepted jobs, Rejected refusals of a full queue.
	Submitted, Rejected uint64
	// Completed, Failed and Cancelled count jobs that ended so.
	Completed, Failed, Cancelled uint64
	// ModelOps is the model operations in flight now, and ModelWaits the
	// operations that had to wait for a slot (with Config.ModelOps only).
	ModelOps   int
	ModelWaits uint64
}

// Stats returns the current stats. Each field is exact; fields read
// while jobs move may not add up.
func (s *Scheduler) Stats() Stats {
	st := Stats{
		Queued:    int(s.counts.queued.Load()),
		Running:   int(s.counts.running.Load()),
		Retained:  int(s.counts.retained.Load()),
		Submitted: s.counts.submitted.Load(),
		Rejected:  s.counts.rejected.Load(),
		Completed: s.counts.completed.Load(),
		Failed:    s.counts.failed.Load(),
		Cancelled: s.counts.cancelled.Load(),
	}
	if s.slots != nil {
		st.ModelOps = int(s.slots.inFlight.Load())
		st.ModelWaits = s.slots.waited.Load()
	}
	return st
}

// Close refuses new jobs and waits until every queued and running job has
// ended and the pool has stopped, or until ctx is done (ctx.Err(); the
// jobs carry on, and Shutdown can cancel them).
func (s *Scheduler) Close(ctx context.Context) error {
	s.stop(false)
	return s.wait(ctx)
}

// Shutdown refuses new jobs, cancels the queued ones (they never start)
// and the running ones, and waits as Close does.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.stop(true)
	return s.wait(ctx)
}

func (s *Scheduler) stop(cancel bool) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.lock()
	s.drain()
	s.syncStarts() // a started job must not be cancelled as queued
	s.syncEnds()
	if cancel {
		// Every stored job after the last started is queued or was
		// cancelled while queued.
		var queued []*record
		if it, err := s.write().LowerBound(table, indexID, s.started.Load()+1); err == nil {
			for raw := it.Next(); raw != nil; raw = it.Next() {
				if r := raw.(*record); r.state == Queued {
					queued = append(queued, r)
				}
			}
		}
		for _, r := range queued {
			s.cancelQueued(r)
		}
	}
	s.unlock()
	s.quitOnce.Do(func() { close(s.quit) })
	if cancel {
		s.cancelBase() // every running job's context
	}
}

func (s *Scheduler) wait(ctx context.Context) error {
	select {
	case <-s.poolDone:
		s.cancelBase()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// now reads the injected clock, containing its panics: a broken clock
// gives zero times (Info), not a failed job. The engine and the
// orchestrator each keep their own (unexported, and they give the Unix
// epoch, the engine also failing the run); one shared copy would need a
// new exported kernel API (issue 17).
func (s *Scheduler) now() (t time.Time) {
	defer func() {
		if recover() != nil {
			t = time.Time{}
		}
	}()
	return s.cfg.Clock.Now()
}

// newID asks the injected ID source for a job ID and checks it, containing
// its panics.
func (s *Scheduler) newID(seq uint64) (jobID string, err error) {
	defer func() {
		if recover() != nil {
			jobID, err = "", errPanic
		}
	}()
	jobID = s.cfg.IDs(seq)
	if err := id.Check("scheduler.job_id", jobID); err != nil {
		return "", err
	}
	return jobID, nil
}
