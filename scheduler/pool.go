package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// run is a started job's runtime part. It is set before the record that
// holds it is stored; pair is written once, before ready is closed.
type run struct {
	ctx     context.Context // its slot's, which only this job's cancel cancels while it plays
	slot    *jobCtx
	started time.Time
	ready   chan struct{}
	pair    *orchestrator.Pair // nil if the pair did not start
}

// cancel cancels the job's pair, unless the job has ended.
func (rn *run) cancel() { rn.slot.cancel(rn) }

// jobCtx is the context a slot's jobs play under, one after another: a
// child of the scheduler's that only the playing job's Cancel cancels, and
// that the slot replaces once it is. A context per job cost three
// allocations and two locks of the scheduler's context per job; a pair
// leaves nothing registered on its caller's context once it has ended.
type jobCtx struct {
	base context.Context
	// newCtx makes the slot's context; nil means context.WithCancel. A
	// test counts what the pairs leave registered on it.
	newCtx func(context.Context) (context.Context, context.CancelFunc)
	mu     sync.Mutex
	ctx    context.Context // guarded by mu
	stop   context.CancelFunc
	cur    *run // the job playing; guarded by mu
}

// testHookJobContext, set only by tests, is the newCtx of the slots that
// New starts.
var testHookJobContext func(context.Context) (context.Context, context.CancelFunc)

// begin makes rn the job playing, under a live context unless the
// scheduler's has ended.
func (c *jobCtx) begin(rn *run) {
	c.mu.Lock()
	if c.ctx == nil || c.ctx.Err() != nil {
		if c.newCtx != nil {
			c.ctx, c.stop = c.newCtx(c.base)
		} else {
			c.ctx, c.stop = context.WithCancel(c.base)
		}
	}
	c.cur, rn.ctx = rn, c.ctx
	c.mu.Unlock()
}

// end records that rn has ended: a later cancel of it does nothing.
func (c *jobCtx) end(rn *run) {
	c.mu.Lock()
	if c.cur == rn {
		c.cur = nil
	}
	c.mu.Unlock()
}

func (c *jobCtx) cancel(rn *run) {
	c.mu.Lock()
	if c.cur == rn {
		c.stop()
	}
	c.mu.Unlock()
}

// close releases the context when the slot stops.
func (c *jobCtx) close() {
	c.mu.Lock()
	if c.stop != nil {
		c.stop()
	}
	c.mu.Unlock()
}

// serve is one pool goroutine: it runs queued jobs, oldest first, until
// the scheduler is closed and the queue is empty. Each job's pair plays on
// this goroutine, which lives as long as the slot: its stack has grown to
// what a pair needs once, where a goroutine per pair would grow a new stack
// for every pair, and a job costs no goroutine handoff.
func (s *Scheduler) serve() {
	defer func() {
		if s.live.Add(-1) == 0 {
			s.teams.close()
			close(s.poolDone)
		}
	}()
	jc := &jobCtx{base: s.base, newCtx: testHookJobContext}
	defer jc.close()
	var ended *record
	for {
		r, closed := s.step(ended, jc)
		ended = nil
		if r != nil {
			ended = s.execute(r)
			continue
		}
		if closed {
			return
		}
		select {
		case <-s.wake:
		case <-s.quit:
		}
	}
}

// step records the end of the job the goroutine has just run, if any, and
// starts the queued job with the lowest submission number, in one write
// transaction: the end is written behind (finish) and the start too, so a
// job usually costs no table write of its own. When no job is queued it
// stores the ends written behind, and returns nil and whether the
// scheduler is closed.
//
// When the table has no queued job left to start, the slot takes the
// oldest pending submission, which comes after every stored job (so FIFO
// holds) and is then stored only once, when it ends: a job that waits
// behind fewer than maxPending others never costs a queued record.
// Pending submissions are otherwise stored in batches, by Submit when the
// buffer is full or by a read, which shares the copied index nodes.
func (s *Scheduler) step(ended *record, jc *jobCtx) (*record, bool) {
	s.lock()
	defer s.unlock()
	if ended != nil {
		s.finish(ended)
	}
	q := s.nextQueued()
	s.mu.Lock()
	if q == nil && len(s.pending) > 0 {
		// The oldest submission, never stored queued: it comes after
		// every stored job. It moves to starts under mu, so a read
		// finds it in one place or the other.
		q = s.pending[0]
		s.pending = popOldest(s.pending)
		delete(s.unstoredIDs, q.id) // now in starts
		s.buffered.Add(1)           // before unsynced drops: flush must not skip it
		s.unsynced.Add(-1)
	} else if q != nil {
		s.dropUnstored(q) // drained, but its drain's deferred work may not have run
		s.buffered.Add(1)
	}
	if q == nil {
		closed := s.closed
		s.mu.Unlock()
		s.syncEnds() // idle: settle the table
		return nil, closed
	}
	r := newStarted(q, run{slot: jc, started: s.now(), ready: make(chan struct{})})
	jc.begin(r.run) // before any read finds the job running, to cancel it
	s.starts[r.id] = r
	s.mu.Unlock()
	s.started.Store(q.seq)
	s.counts.queued.Add(-1)
	s.counts.running.Add(1)
	if s.waiters.Load() > 0 {
		s.syncStarts() // a Subscribe may be waiting for this start
	}
	return r, false
}

// popOldest drops the oldest of the pending submissions. It reslices
// rather than copy the rest down, but takes the last one by going back
// to the slice's start: a buffer that a slot empties job by job would
// otherwise have no room left, and every Submit would allocate an array.
func popOldest(pending []*record) []*record {
	pending[0] = nil
	if len(pending) == 1 {
		return pending[:0]
	}
	return pending[1:]
}

// nextQueued returns the stored queued job to start next, if any. Started
// jobs whose start is written behind are still Queued in the table: it is
// the first queued one after the last started. The caller holds a write
// transaction.
func (s *Scheduler) nextQueued() *record {
	from := max(s.started.Load(), s.skipped) + 1
	if from > s.lastQueued {
		return nil // every stored queued job has started or was cancelled
	}
	// After the last started, every stored job is queued or was
	// cancelled while queued; each cancelled one is passed over once.
	it, err := s.write().LowerBound(table, indexID, from)
	if err != nil {
		return nil
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		r := raw.(*record)
		if r.state == Queued {
			return r
		}
		s.skipped = r.seq
	}
	return nil
}

// execute runs the job's pair to its end and returns the job's terminal
// record, for step to store.
func (s *Scheduler) execute(r *record) *record {
	rn := r.run
	// The pair plays on this goroutine, whose stack has already grown to
	// what a pair needs; Started hands it to Subscribe meanwhile.
	var pair *orchestrator.Pair
	var err error
	if r.cfg.ID == "" {
		pair, err = playPair(rn.ctx, s.teams, r.cfg, r.id, rn)
	} else {
		cfg := *r.cfg
		s.gateProviders(&cfg)
		host := cfg.Started
		cfg.Started = func(p *orchestrator.Pair) {
			rn.pair = p
			close(rn.ready)
			if host != nil {
				host(p)
			}
		}
		pair, err = runPair(rn.ctx, cfg)
	}
	if rn.pair == nil {
		// Refused before its lease (Subscribe: ErrNoTimeline), or ended
		// because appending pair.started failed (Subscribe gets the
		// timeline as it ended).
		rn.pair = pair
		close(rn.ready)
	}
	var res orchestrator.Result
	state := Failed
	switch {
	case pair != nil:
		res, err = pair.Wait(context.Background()) // returns at once: the pair has ended
		if err == nil {
			state = Completed
		} else if res.Reason == orchestrator.ReasonCancelled {
			state = Cancelled
		}
	case rn.ctx.Err() != nil:
		// Cancelled before its pair could lease its plan.
		state, err = Cancelled, ErrCancelled
	}
	rn.slot.end(rn)
	return newEnded(r, state, ending{at: s.now(), result: res, err: err})
}

// finish records a job's end. The terminal record is written behind, in
// ends, where it replaces the job's start if that was written behind too,
// and the job's waiters are woken at once. Ends are stored, all of
// them in one batch, when maxEnds are waiting or when this end makes more
// than Config.Retain finished jobs, so that the oldest are forgotten
// (retire) before the end is seen. The caller holds the write lock.
func (s *Scheduler) finish(r *record) {
	s.counts.running.Add(-1)
	switch r.state {
	case Completed:
		s.counts.completed.Add(1)
	case Cancelled:
		s.counts.cancelled.Add(1)
	default:
		s.counts.failed.Add(1)
	}
	s.counts.retained.Add(1)
	s.mu.Lock()
	if _, behind := s.starts[r.id]; behind {
		delete(s.starts, r.id) // its Running record need never be stored
	} else {
		s.buffered.Add(1)
	}
	s.endOrder = append(s.endOrder, r)
	store := len(s.endOrder) >= maxEnds || s.finished.len()+len(s.endOrder) > s.cfg.Retain
	if store {
		// A read waits for the commit (watch finds the job being
		// stored), so none sees the end before the retired jobs go.
		s.storing[r.id] = r
	} else {
		s.ends[r.id] = r
		s.wakeLocked(r.id)
	}
	s.mu.Unlock()
	if store {
		s.syncEnds() // wakes r's waiters after the commit
	}
}

// runPair plays the pair to its end. The orchestrator contains the pair's
// own panics and ends the pair; this recover is the last line for a panic
// that escapes it (a config part it calls while building the pair), which
// then fails the job without a pair.
func runPair(ctx context.Context, cfg orchestrator.Config) (p *orchestrator.Pair, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errPanic
		}
	}()
	return orchestrator.Run(ctx, cfg)
}

// playPair is runPair on the config's Team.
func playPair(ctx context.Context, t *teams, cfg *orchestrator.Config, pairID string, rn *run) (p *orchestrator.Pair, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errPanic
		}
	}()
	return t.play(ctx, cfg, pairID, rn)
}
