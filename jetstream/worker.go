package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

// PlayFunc plays one job to its end and reports how it ended. It must
// return soon after ctx is done (the job was cancelled, or the worker is
// draining); its report's State is then Cancelled.
type PlayFunc func(ctx context.Context, j job.Job) job.Report

// WorkerConfig configures Work.
type WorkerConfig struct {
	// Pairs is the number of jobs played at once: the worker fetches one
	// job per free slot. 1..4096.
	Pairs int
	// Play plays a job. Required.
	Play PlayFunc
	// Drain bounds how long jobs in hand may run once Work's context is
	// done; past it they are cancelled and handed back. 0 means AckWait.
	Drain time.Duration
	// Resume continues a job delivered again after it started: the
	// worker that played it stopped answering, so its pair may have done
	// anything. It must continue the pair from its recorded timeline and
	// never re-run what may have taken effect; its report ends the job.
	// nil means such a job is not played again: it ends failed with
	// reason job.ReasonInterrupted.
	Resume PlayFunc
}

// Work plays jobs until ctx is done, then drains: it stops fetching, lets
// the jobs in hand finish within cfg.Drain, and hands back (Nak) the ones
// that did not, which another worker then receives as a redelivery. It
// also turns MAX_DELIVERIES advisories into failed jobs.
func (b *Backend) Work(ctx context.Context, cfg WorkerConfig) error {
	if cfg.Play == nil {
		return bound.Missing("worker.play")
	}
	if cfg.Pairs < 1 || cfg.Pairs > 4096 {
		return bound.Count("worker.pairs", cfg.Pairs, 4096)
	}
	if cfg.Drain <= 0 {
		cfg.Drain = b.cfg.AckWait
	}
	sub, err := b.watchMaxDeliveries()
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	cs := &cancels{fns: make(map[string]context.CancelFunc)}
	csub, err := b.watchCancels(cs)
	if err != nil {
		return err
	}
	defer func() { _ = csub.Unsubscribe() }()
	// Jobs play under playCtx, which outlives ctx by at most cfg.Drain.
	playCtx, stopPlay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPlay()
	drainDone := make(chan struct{})
	defer close(drainDone)
	go func() {
		select {
		case <-ctx.Done():
		case <-drainDone:
			return
		}
		t := time.NewTimer(cfg.Drain)
		defer t.Stop()
		select {
		case <-t.C:
			stopPlay()
		case <-drainDone:
		}
	}()
	var wg sync.WaitGroup
	for range cfg.Pairs {
		wg.Go(func() { b.slot(ctx, playCtx, cs, cfg) })
	}
	wg.Wait()
	return nil
}

// slot fetches and plays one job at a time until ctx is done.
func (b *Backend) slot(ctx, playCtx context.Context, cs *cancels, cfg WorkerConfig) {
	wait := min(b.cfg.AckWait, time.Second)
	for ctx.Err() == nil {
		batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The connection is down or reconnecting: wait a fetch
			// period, or for ctx.
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		for msg := range batch.Messages() {
			b.handle(playCtx, cs, msg, cfg)
		}
	}
}

// handle claims a delivered job and plays it, or settles a delivery that
// must not be played.
func (b *Backend) handle(ctx context.Context, cs *cancels, msg jetstream.Msg, cfg WorkerConfig) {
	jobID := msg.Headers().Get(nats.MsgIdHdr)
	meta, err := msg.Metadata()
	if jobID == "" || err != nil {
		_ = msg.Term() // not a job: never deliver it again
		return
	}
	attempt := int(meta.NumDelivered)
	claimed, resumed := false, false
	st, err := b.transition(ctx, jobID, func(st job.Status) (job.Status, bool) {
		switch st.State {
		case job.Queued:
			claimed, resumed = true, false
			st.State, st.Attempt, st.Started = job.Running, attempt, time.Now().UTC()
		case job.Running:
			// Delivered again after it started: its pair may have
			// done anything, so it is resumed from its record, or
			// not played again. Taking the attempt keeps the worker
			// that stopped answering from ending the job.
			claimed, resumed = true, cfg.Resume != nil
			if resumed {
				st.Attempt = attempt
				break
			}
			claimed = false
			st.State, st.Attempt, st.Reason, st.Ended = job.Failed, attempt, job.ReasonInterrupted, time.Now().UTC()
			st.Error = "the worker playing the job stopped answering"
		default:
			return st, false
		}
		return st, true
	})
	if errors.Is(err, job.ErrNotFound) {
		_ = msg.Term()
		return
	}
	if err != nil {
		_ = msg.Nak() // the bucket is unreachable: try again later
		return
	}
	if !claimed || st.State != job.Running {
		_ = msg.DoubleAck(ctx)
		return
	}
	play := cfg.Play
	if resumed {
		play = cfg.Resume
	}
	rep := b.play(ctx, cs, msg, job.Job{ID: jobID, Attempt: attempt, Spec: msg.Data()}, play)
	if rep.State == job.Cancelled && ctx.Err() != nil {
		// Draining past its bound: hand the job back.
		_ = msg.Nak()
		return
	}
	if !rep.State.Terminal() {
		rep.State, rep.Reason = job.Failed, "no_terminal_report"
	}
	_, err = b.transition(context.WithoutCancel(ctx), jobID, func(st job.Status) (job.Status, bool) {
		if st.State != job.Running || st.Attempt != attempt {
			return st, false
		}
		st.State, st.Reason, st.Error, st.Ended = rep.State, rep.Reason, rep.Error, time.Now().UTC()
		return st, true
	})
	if err != nil {
		_ = msg.Nak()
		return
	}
	_ = msg.DoubleAck(context.WithoutCancel(ctx))
}

// play runs the job under a context that its cancel key cancels, sending
// heartbeats while it plays. The worker's one subscription to the cancel
// keys tells it of a request made while it plays; a request made before
// it registered the job is in the bucket, which it reads once after.
func (b *Backend) play(ctx context.Context, cs *cancels, msg jetstream.Msg, j job.Job, play PlayFunc) job.Report {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs.add(j.ID, cancel)
	defer cs.remove(j.ID)
	if _, err := b.kv.Get(jctx, cancelKey(j.ID)); err == nil {
		cancel()
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "state_unreachable", Error: err.Error()}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		t := time.NewTicker(b.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-jctx.Done():
				return
			}
		}
	})
	return callPlay(jctx, j, play)
}

// cancels holds the cancel funcs of the jobs a worker plays.
type cancels struct {
	mu  sync.Mutex
	fns map[string]context.CancelFunc
}

func (c *cancels) add(jobID string, fn context.CancelFunc) {
	c.mu.Lock()
	c.fns[jobID] = fn
	c.mu.Unlock()
}

func (c *cancels) remove(jobID string) {
	c.mu.Lock()
	delete(c.fns, jobID)
	c.mu.Unlock()
}

func (c *cancels) fire(jobID string) {
	c.mu.Lock()
	fn := c.fns[jobID]
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// watchCancels subscribes to the puts of the bucket's cancel keys: one
// subscription for the worker instead of a watch per job.
func (b *Backend) watchCancels(cs *cancels) (*nats.Subscription, error) {
	prefix := "$KV." + b.cfg.Name + "_state." + cancelKey("")
	return b.cfg.Conn.Subscribe(prefix+">", func(m *nats.Msg) {
		if op := m.Header.Get("KV-Operation"); op != "" {
			return // a delete or a purge, not a request
		}
		cs.fire(strings.TrimPrefix(m.Subject, prefix))
	})
}

// callPlay contains a panic of play as a failed job.
func callPlay(ctx context.Context, j job.Job, play PlayFunc) (rep job.Report) {
	defer func() {
		if recover() != nil {
			rep = job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "panic", Error: "jetstream: the job's play panicked"}
		}
	}()
	return play(ctx, j)
}

// watchMaxDeliveries fails each job that the consumer gave up on and
// deletes its message from the stream. Every worker watches; the
// compare-and-swap lets one of them write the failure.
func (b *Backend) watchMaxDeliveries() (*nats.Subscription, error) {
	subject := "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + b.cfg.Name + "_jobs." + b.cfg.Name + "_workers"
	return b.cfg.Conn.Subscribe(subject, func(m *nats.Msg) {
		var adv struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if len(m.Data) > maxStatus || json.Unmarshal(m.Data, &adv) != nil || adv.StreamSeq == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raw, err := b.stream.GetMsg(ctx, adv.StreamSeq)
		if err != nil {
			return // deleted already
		}
		// Deleted first, so that whoever sees the job failed finds
		// its message gone.
		_ = b.stream.DeleteMsg(ctx, adv.StreamSeq)
		jobID := raw.Header.Get(nats.MsgIdHdr)
		if jobID != "" {
			_, _ = b.transition(ctx, jobID, func(st job.Status) (job.Status, bool) {
				st.State, st.Reason, st.Ended = job.Failed, job.ReasonMaxDeliveries, time.Now().UTC()
				st.Error = "the job was delivered as often as allowed without ending"
				return st, true
			})
		}
	})
}
