package scheduler

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/job"
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
	// Resume, when set, continues an interrupted pair from its record
	// (orchestrator.RunResumed) instead of starting it: Pair is the
	// pair's config as it was first started, and Resume's own Pair is
	// ignored. The scheduler keeps the pointer; it must not change after
	// Submit. A resumed job needs Pair.ID.
	Resume *orchestrator.ResumeConfig
}

// Scheduler runs jobs (O8). Its methods are safe for concurrent use. New
// starts its goroutine pool; Close or Shutdown stops it.
type Scheduler struct {
	cfg   Config
	db    *memdb.MemDB
	slots *slots // the model-operation limit; nil without one
	teams *teams

	mu       sync.Mutex
	work     sync.Cond         // signalled when a job is queued or the scheduler closes
	jobs     map[string]*entry // every job kept: queued, running, finished
	queue    fifo              // queued jobs, and jobs cancelled while queued, oldest first
	finished fifo              // finished jobs kept, oldest first
	seq      uint64
	closed   bool
	stats    Stats // the gauges and counters; ModelOps fields are read from slots

	base       context.Context // parent of every job's context
	cancelBase context.CancelFunc
	live       int           // pool goroutines still running; guarded by mu
	poolDone   chan struct{} // closed by the last one

	// jobContext, set only by tests before the pool starts, makes each
	// job's context in place of context.WithCancel.
	jobContext func(context.Context) (context.Context, context.CancelFunc)
}

// entry is one job. Its mutable fields are guarded by the scheduler's mu;
// pair is written once, before ready is closed.
type entry struct {
	id    string
	seq   uint64
	key   string // its read-model key
	row   *row   // its snapshot in the read model
	cfg   *orchestrator.Config
	rc    *orchestrator.ResumeConfig // set for a resumed pair
	done  chan struct{}              // closed when the job ends
	ready chan struct{}              // closed when its pair is known, or it ended without one
	pair  *orchestrator.Pair
	// handed is set once pair is known; only the goroutine playing the
	// job reads or writes it.
	handed bool

	state                     State
	submitted, started, ended time.Time
	result                    orchestrator.Result
	err                       error
	ctx                       context.Context // while running
	cancel                    context.CancelFunc
}

func (e *entry) info() Info {
	return Info{ID: e.id, Seq: e.seq, State: e.state, Submitted: e.submitted,
		Started: e.started, Ended: e.ended, Result: e.result, Err: e.err}
}

// New validates cfg and starts a scheduler with its pool of cfg.Pairs
// slots, one goroutine each, which wait for jobs until Close or Shutdown.
func New(cfg Config) (*Scheduler, error) { return newScheduler(cfg, nil) }

// newScheduler is New with a test's maker of job contexts, nil for
// context.WithCancel; it is in place before the pool starts.
func newScheduler(cfg Config, jobContext func(context.Context) (context.Context, context.CancelFunc)) (*Scheduler, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	db, err := memdb.NewMemDB(newSchema())
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:      cfg,
		db:       db,
		jobs:     make(map[string]*entry),
		live:     cfg.Pairs,
		poolDone: make(chan struct{}),

		jobContext: jobContext,
	}
	s.work.L = &s.mu
	s.teams = newTeams(s)
	if cfg.ModelOps > 0 {
		s.slots = newSlots(cfg.ModelOps, cfg.ModelWait)
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	for range cfg.Pairs {
		go s.serve()
	}
	return s, nil
}

// Submit queues job and returns its ID at once. It never waits: a full
// queue is a *QueueFullError, a closed scheduler ErrClosed. ctx bounds only
// the submission; the job lives under the scheduler (Cancel, Shutdown).
// The job is visible to every other method as soon as Submit returns.
func (s *Scheduler) Submit(ctx context.Context, j Job) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if j.Pair == nil {
		return "", bound.Missing("job.pair")
	}
	if j.Resume != nil && j.Pair.ID == "" {
		return "", bound.Missing("job.pair.id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	if s.stats.Queued >= s.cfg.Queue {
		s.stats.Rejected++
		return "", &QueueFullError{Limit: s.cfg.Queue}
	}
	seq := s.seq + 1
	jobID, err := s.newID(seq)
	if err == nil && s.jobs[jobID] != nil {
		err = bound.Conflicting("scheduler.ids", "the ID source returned an ID in use")
	}
	if err != nil {
		return "", err
	}
	s.seq = seq
	e := &entry{id: jobID, seq: seq, key: seqKey(seq), cfg: j.Pair, rc: j.Resume, state: Queued,
		submitted: s.now(), done: make(chan struct{}), ready: make(chan struct{})}
	s.jobs[jobID] = e
	s.queue.push(e)
	s.stats.Queued++
	s.stats.Submitted++
	txn := s.db.Txn(true)
	s.put(txn, e)
	txn.Commit()
	s.work.Signal()
	return jobID, nil
}

// Get returns a snapshot of the job.
func (s *Scheduler) Get(jobID string) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.jobs[jobID]
	if e == nil {
		return Info{}, ErrNotFound
	}
	return e.info(), nil
}

// List yields the jobs in state, or every job for state 0, in submission
// order, from one snapshot taken when List is called.
func (s *Scheduler) List(state State) iter.Seq[Info] {
	rs := rows(s.db.Txn(false), state)
	return func(yield func(Info) bool) {
		for r := range rs {
			if !yield(r.Info) {
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
	s.mu.Lock()
	e := s.jobs[jobID]
	s.mu.Unlock()
	if e == nil {
		return Info{}, ErrNotFound
	}
	select {
	case <-e.done:
	default:
		select {
		case <-e.done:
		case <-ctx.Done():
			return Info{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.info(), nil
}

// Cancel cancels a job. A queued job ends cancelled at once and never
// starts; a running job's pair is cancelled and the job ends cancelled
// (unless its pair ended first); Wait reports the end. Cancelling a job
// that has ended does nothing.
func (s *Scheduler) Cancel(jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.jobs[jobID]
	switch {
	case e == nil:
		return ErrNotFound
	case e.state == Running:
		e.cancel()
	case e.state == Queued:
		s.cancelQueued(e)
	}
	return nil
}

// Subscribe returns a cursor over the job's pair timeline after afterSeq,
// with the pair's gap-free replay-then-tail contract (O7). For a job still
// queued it waits, under ctx, until the job starts. A job that ended
// without a pair gives ErrNoTimeline.
func (s *Scheduler) Subscribe(ctx context.Context, jobID string, afterSeq uint64) (*eventlog.Subscription, error) {
	s.mu.Lock()
	e := s.jobs[jobID]
	s.mu.Unlock()
	if e == nil {
		return nil, ErrNotFound
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.pair == nil {
		return nil, ErrNoTimeline
	}
	return e.pair.Subscribe(ctx, afterSeq)
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

// Stats returns the current stats: the job counts from one moment, the
// model-operation figures from just after it.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	st := s.stats
	s.mu.Unlock()
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
	if cancel {
		for e := range s.queue.all() {
			if e.state == Queued {
				s.cancelQueued(e)
			}
		}
		s.cancelBase() // every running job's context
	}
	s.work.Broadcast()
	s.mu.Unlock()
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

// cancelQueued ends a queued job cancelled; it stays in the queue, which
// passes over it. The caller holds mu.
func (s *Scheduler) cancelQueued(e *entry) {
	e.state, e.ended, e.err = Cancelled, s.now(), ErrCancelled
	s.stats.Queued--
	s.stats.Cancelled++
	close(e.ready) // no pair: Subscribe gives ErrNoTimeline
	txn := s.db.Txn(true)
	s.retire(txn, e)
	txn.Commit()
	close(e.done)
}

// retire records a job's end: it keeps the job among the finished ones,
// forgets the oldest once more than Config.Retain are kept, and writes
// both to the read model in txn. The caller holds mu, has set the job's
// terminal state, and commits txn and then closes the job's done channel
// before it lets go of mu.
func (s *Scheduler) retire(txn *memdb.Txn, e *entry) {
	s.finished.push(e)
	if s.finished.len() > s.cfg.Retain {
		g := s.finished.pop()
		delete(s.jobs, g.id)
		if err := txn.Delete(table, g.row); err != nil {
			panic("scheduler: read model: " + err.Error()) // each finished job is deleted once
		}
	} else {
		s.stats.Retained++
	}
	s.put(txn, e)
}

// put writes e's snapshot to the read model in place of the one before.
// The caller holds mu: the read model changes with the jobs map, in the
// same critical section.
func (s *Scheduler) put(txn *memdb.Txn, e *entry) {
	if e.row != nil {
		if err := txn.Delete(table, e.row); err != nil {
			panic("scheduler: read model: " + err.Error()) // each row is deleted once
		}
	}
	e.row = &row{State: e.state, Key: e.key, Info: e.info()}
	if err := txn.Insert(table, e.row); err != nil {
		panic("scheduler: read model: " + err.Error()) // a schema error: a bug here
	}
}

// now reads the injected clock, containing its panics: a broken clock
// gives zero times (Info), not a failed job.
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

// fifo is a queue of jobs, oldest first.
type fifo struct {
	items []*entry
	head  int
}

func (q *fifo) len() int { return len(q.items) - q.head }

func (q *fifo) push(e *entry) { q.items = append(q.items, e) }

// pop removes the oldest job; the queue is not empty.
func (q *fifo) pop() *entry {
	e := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 1024 && q.head*2 >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return e
}

func (q *fifo) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, e := range q.items[q.head:] {
			if !yield(e) {
				return
			}
		}
	}
}

// Jobs returns the scheduler as a job.Backend, for hosts that treat every
// backend alike.
func (s *Scheduler) Jobs() job.Backend { return backend{s} }

type backend struct{ s *Scheduler }

func (b backend) Status(_ context.Context, jobID string) (job.Status, error) {
	in, err := b.s.Get(jobID)
	return in.Status(), err
}

func (b backend) Statuses(_ context.Context, state job.State) iter.Seq2[job.Status, error] {
	return func(yield func(job.Status, error) bool) {
		for in := range b.s.List(state) {
			if !yield(in.Status(), nil) {
				return
			}
		}
	}
}

func (b backend) Cancel(_ context.Context, jobID string) error { return b.s.Cancel(jobID) }

func (b backend) Await(ctx context.Context, jobID string) (job.Status, error) {
	in, err := b.s.Wait(ctx, jobID)
	return in.Status(), err
}
