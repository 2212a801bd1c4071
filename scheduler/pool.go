package scheduler

import (
	"context"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// serve is one pool goroutine: it runs queued jobs, oldest first, until
// the scheduler is closed and the queue is empty. Each job's pair plays on
// this goroutine, whose stack has grown to what a pair needs once.
func (s *Scheduler) serve() {
	defer func() {
		s.mu.Lock()
		s.live--
		last := s.live == 0
		s.mu.Unlock()
		if last {
			s.teams.close()
			close(s.poolDone)
		}
	}()
	var ended *ending
	for {
		e := s.step(ended)
		if e == nil {
			return
		}
		ended = s.execute(e)
	}
}

// step records the end of the job the goroutine has just played, if any,
// and starts the oldest queued job, waiting for one; nil once the
// scheduler is closed and no job is queued. The end and the start are one
// critical section and one read-model transaction.
func (s *Scheduler) step(ended *ending) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var txn *memdb.Txn
	if ended != nil {
		txn = s.db.Txn(true)
		s.end(txn, ended)
	}
	defer func() {
		if txn != nil {
			txn.Commit()
		}
		if ended != nil {
			close(ended.job.done) // after the commit: a waiter's List sees the end
		}
	}()
	for {
		for s.queue.len() > 0 {
			e := s.queue.pop()
			if e.state != Queued {
				continue // cancelled while queued
			}
			if s.jobContext != nil {
				e.ctx, e.cancel = s.jobContext(s.base)
			} else {
				e.ctx, e.cancel = context.WithCancel(s.base)
			}
			e.state, e.started = Running, s.now()
			s.stats.Queued--
			s.stats.Running++
			if txn == nil {
				txn = s.db.Txn(true)
			}
			s.put(txn, e)
			return e
		}
		if s.closed {
			return nil
		}
		if txn != nil {
			txn.Commit() // before waiting: the end is seen at once
			txn = nil
		}
		if ended != nil {
			close(ended.job.done)
			ended = nil
		}
		s.work.Wait()
	}
}

// ending is how a job that ran ended, for step to record.
type ending struct {
	job    *entry
	state  State
	result orchestrator.Result
	err    error
}

// execute runs the job's pair to its end and returns how it ended.
func (s *Scheduler) execute(e *entry) *ending {
	// Started hands the pair to Subscribe while it plays.
	var pair *orchestrator.Pair
	var err error
	if e.cfg.ID == "" {
		pair, err = playPair(e.ctx, s.teams, e.cfg, e.id, e)
	} else {
		cfg := *e.cfg
		s.gateProviders(&cfg)
		host := cfg.Started
		cfg.Started = func(p *orchestrator.Pair) {
			e.handOver(p)
			if host != nil {
				host(p)
			}
		}
		pair, err = runPair(e.ctx, cfg, e.rc)
	}
	if !e.handed {
		// Refused before its lease (Subscribe: ErrNoTimeline), or ended
		// because appending pair.started failed (Subscribe gets the
		// timeline as it ended).
		e.handOver(pair)
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
	case e.ctx.Err() != nil:
		// Cancelled before its pair could lease its plan.
		state, err = Cancelled, ErrCancelled
	}
	e.cancel() // releases the job's context
	return &ending{job: e, state: state, result: res, err: err}
}

// end records the end of a job that ran. The caller holds mu.
func (s *Scheduler) end(txn *memdb.Txn, x *ending) {
	e := x.job
	e.state, e.ended, e.result, e.err = x.state, s.now(), x.result, x.err
	e.cfg, e.rc, e.ctx = nil, nil, nil
	s.stats.Running--
	switch e.state {
	case Completed:
		s.stats.Completed++
	case Cancelled:
		s.stats.Cancelled++
	default:
		s.stats.Failed++
	}
	s.retire(txn, e)
}

// handOver records the job's pair, or that it has none, once: only the
// goroutine playing the job calls it.
func (e *entry) handOver(p *orchestrator.Pair) {
	if e.handed {
		return
	}
	e.handed, e.pair = true, p
	close(e.ready)
}

// runPair plays the pair to its end. The orchestrator contains the pair's
// own panics and ends the pair; this recover is the last line for a panic
// that escapes it (a config part it calls while building the pair), which
// then fails the job without a pair.
func runPair(ctx context.Context, cfg orchestrator.Config, rc *orchestrator.ResumeConfig) (p *orchestrator.Pair, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errPanic
		}
	}()
	if rc != nil {
		r := *rc
		r.Pair = cfg
		return orchestrator.RunResumed(ctx, r)
	}
	return orchestrator.Run(ctx, cfg)
}

// playPair is runPair on the config's Team.
func playPair(ctx context.Context, t *teams, cfg *orchestrator.Config, pairID string, e *entry) (p *orchestrator.Pair, err error) {
	defer func() {
		if recover() != nil {
			p, err = nil, errPanic
		}
	}()
	return t.play(ctx, cfg, pairID, e)
}
