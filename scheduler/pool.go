package scheduler

import (
	"context"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// run is a started job's runtime part. It is set before the record that
// holds it is stored; pair is written once, before ready is closed.
type run struct {
	ctx     context.Context // the job's own: Cancel cancels it
	cancel  context.CancelFunc
	started time.Time
	ready   chan struct{}
	pair    *orchestrator.Pair // nil if the pair did not start
}

// serve is one pool goroutine: it runs queued jobs, oldest first, until
// the scheduler is closed and the queue is empty.
func (s *Scheduler) serve() {
	defer func() {
		if s.live.Add(-1) == 0 {
			close(s.poolDone)
		}
	}()
	var ended *record
	for {
		r, closed := s.step(ended)
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

// step stores the terminal record of the job the goroutine has just run,
// if any, and moves the queued job with the lowest submission number to
// Running, in one transaction: a job's end and the next one's start cost
// one write. When no job is queued it returns nil and whether the
// scheduler is closed.
func (s *Scheduler) step(ended *record) (*record, bool) {
	txn := s.db.Txn(true)
	defer txn.Abort() // a no-op after Commit
	closed := s.drain(txn)
	if ended != nil {
		s.finish(txn, ended)
	}
	raw, err := txn.First(table, stateOrder, Queued)
	if err != nil || raw == nil {
		txn.Commit()
		return nil, closed
	}
	q := raw.(*record)
	ctx, cancel := context.WithCancel(s.base)
	r := &record{id: q.id, seq: q.seq, state: Running, submitted: q.submitted, cfg: q.cfg,
		run: &run{ctx: ctx, cancel: cancel, started: s.now(), ready: make(chan struct{})}}
	put(txn, r)
	s.counts.queued.Add(-1)
	s.counts.running.Add(1)
	txn.Commit()
	return r, false
}

// execute runs the job's pair to its end and returns the job's terminal
// record, for step to store.
func (s *Scheduler) execute(r *record) *record {
	rn := r.run
	cfg := *r.cfg
	if cfg.ID == "" {
		cfg.ID = r.id
	}
	if s.slots != nil {
		for _, w := range [2]*workers.Config{&cfg.First, &cfg.Second} {
			if w.Engine.Provider != nil {
				w.Engine.Provider = &gate{inner: w.Engine.Provider, slots: s.slots}
			}
		}
	}
	pair, err := startPair(rn.ctx, cfg)
	rn.pair = pair
	close(rn.ready)
	var res orchestrator.Result
	state := Failed
	switch {
	case pair != nil:
		res, err = pair.Wait(context.Background()) // the pair always ends
		if err == nil {
			state = Completed
		} else if res.Reason == orchestrator.ReasonCancelled {
			state = Cancelled
		}
	case rn.ctx.Err() != nil:
		// Cancelled before its pair could lease its plan.
		state, err = Cancelled, ErrCancelled
	}
	rn.cancel()
	return &record{id: r.id, seq: r.seq, state: state, submitted: r.submitted, run: rn,
		end: &ending{at: s.now(), result: res, err: err}}
}

// finish stores a job's single terminal record. The caller holds a write
// transaction.
func (s *Scheduler) finish(txn *memdb.Txn, r *record) {
	put(txn, r)
	s.counts.running.Add(-1)
	switch r.state {
	case Completed:
		s.counts.completed.Add(1)
	case Cancelled:
		s.counts.cancelled.Add(1)
	default:
		s.counts.failed.Add(1)
	}
	s.retire(txn, r.id)
}

// startPair starts the pair, containing a panic of the parts it builds.
func startPair(ctx context.Context, cfg orchestrator.Config) (p *orchestrator.Pair, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errPanic
		}
	}()
	return orchestrator.Start(ctx, cfg)
}
