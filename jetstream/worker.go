package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
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
	// done; past it they are stopped as if their lease were lost, so that
	// their pairs' timelines do not end, and handed back. 0 means
	// AckWait.
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
// that did not, which another worker then receives as a redelivery and
// resumes (cfg.Resume): a play stopped at the bound publishes nothing
// more, its end included, and its job stays running. A job that a fetch
// already on its way brings after ctx is done is handed back unplayed.
// It also turns MAX_DELIVERIES advisories into failed jobs.
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
	cs := b.playing
	csub, err := b.watchCancels(cs)
	if err != nil {
		return err
	}
	defer func() { _ = csub.Unsubscribe() }()
	// A reconnected worker checks each job it holds: a cancel request
	// put while it was away reached no subscription, and its lease may
	// have passed to another delivery. Each CONNECTED after the first is
	// a reconnection.
	reconnected := b.cfg.Conn.StatusChanged(nats.CONNECTED)
	var kicks sync.WaitGroup
	kicks.Go(func() {
		for range reconnected {
			cs.kickAll()
		}
	})
	defer kicks.Wait()
	defer b.cfg.Conn.RemoveStatusListener(reconnected) // ends the loop above
	// Jobs play under playCtx, which outlives ctx by at most cfg.Drain;
	// its end hands back every play still going (play).
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

// slot fetches and plays one job at a time until ctx is done: one, so
// that the worker is delivered no job it does not play.
func (b *Backend) slot(ctx, playCtx context.Context, cs *inflight, cfg WorkerConfig) {
	wait := min(b.cfg.AckWait, time.Second)
	for ctx.Err() == nil {
		if b.beforeFetch != nil {
			b.beforeFetch()
		}
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
			if ctx.Err() != nil {
				// Fetched as the drain began: another worker plays
				// it, once this worker's fetches still on their way
				// have expired.
				_ = msg.NakWithDelay(wait)
				continue
			}
			b.handle(playCtx, cs, msg, cfg)
		}
	}
}

// handle claims a delivered job and plays it, or settles a delivery that
// must not be played.
func (b *Backend) handle(ctx context.Context, cs *inflight, msg jetstream.Msg, cfg WorkerConfig) {
	jobID := msg.Headers().Get(nats.MsgIdHdr)
	meta, err := msg.Metadata()
	if jobID == "" || err != nil {
		_ = msg.Term() // not a job: never deliver it again
		return
	}
	attempt := int(meta.NumDelivered)
	claimed, resumed, older := false, false, false
	guess, rev := queuedStatus(jobID, msg.Headers().Get(queuedHdr))
	st, rev, err := b.transitionFrom(ctx, jobID, guess, rev, func(st job.Status) (job.Status, bool) {
		claimed, resumed, older = false, false, false
		switch {
		case st.State == job.Queued:
			claimed = true
			st.State, st.Attempt, st.Started = job.Running, attempt, time.Now().UTC()
		case st.State == job.Running && attempt <= st.Attempt:
			// A delivery older than the one that holds the job: this
			// worker fetched it, then stalled past AckWait before it
			// could claim it. The newer holds the job, and settles
			// its message: an attempt that takes a job over always
			// has a higher number than the one it takes it from,
			// which the readers of the events stream rely on.
			older = true
			return st, false
		case st.State == job.Running:
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
	if older {
		return // an ack or a nak would settle the newer delivery's message
	}
	if !claimed || st.State != job.Running {
		_ = msg.DoubleAck(ctx)
		return
	}
	play := cfg.Play
	if resumed {
		play = cfg.Resume
	}
	rep, stopped := b.play(ctx, cs, msg, job.Job{ID: jobID, Attempt: attempt, Spec: msg.Data()}, play)
	switch stopped {
	case errLeaseLost:
		// Another delivery holds the job now: its message is not this
		// worker's to settle.
		return
	case errHandedBack:
		// Draining past its bound: the job stays running under this
		// attempt, which the next delivery takes over by
		// compare-and-swap and resumes.
		_ = msg.Nak()
		return
	}
	if !rep.State.Terminal() {
		rep.State, rep.Reason = job.Failed, "no_terminal_report"
	}
	st, _, err = b.transitionFrom(context.WithoutCancel(ctx), jobID, st, rev, func(st job.Status) (job.Status, bool) {
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
	if st.State == job.Running && st.Attempt != attempt {
		return // taken over meanwhile: the new delivery settles it
	}
	// The terminal is written: an ack that is lost only brings the job
	// back once, to be settled as ended, so it is not waited for.
	_ = msg.Ack()
}

// Attempt returns an observer that passes each event of the pair to o
// while the attempt of the job that this worker plays may publish: once
// another delivery took the job over, or the draining worker hands it
// back, it refuses every event, as the attempt's Timeline does, so that
// o (a worker's local store) records no end for a pair that goes on
// elsewhere. Made outside a play of the job, it is o.
func (b *Backend) Attempt(pairID string, o eventlog.Observer) eventlog.Observer {
	h := b.playing.get(pairID)
	if h == nil {
		return o
	}
	return &attemptObserver{h: h, o: o}
}

type attemptObserver struct {
	h *held
	o eventlog.Observer
}

func (a *attemptObserver) Observe(ctx context.Context, e eventlog.Event) error {
	if err := a.h.stopped(); err != nil {
		return err
	}
	return a.o.Observe(ctx, e)
}

// errLeaseLost is the cause of a play cancelled because another delivery
// of its job took it over while this worker could not send heartbeats.
var errLeaseLost = errors.New("jetstream: the job was delivered to another worker")

// errHandedBack is the cause of a play stopped because its worker's drain
// bound passed: the job goes back to the queue, to be resumed.
var errHandedBack = errors.New("jetstream: the draining worker handed the job back")

// play runs the job under a context that its cancel key cancels, sending
// heartbeats while it plays. The worker's one subscription to the cancel
// keys tells it of a request made while it plays; a request made before
// it registered the job is in the bucket, which it reads as the pair
// starts, and again after each reconnection or late heartbeat, when it
// also checks that no other delivery took the job over. stopped is
// errLeaseLost after such a takeover (the job is no longer this
// worker's), errHandedBack once ctx ended (the drain's bound passed), and
// nil otherwise; either way the play publishes nothing more of the pair.
func (b *Backend) play(ctx context.Context, cs *inflight, msg jetstream.Msg, j job.Job, play PlayFunc) (rep job.Report, stopped error) {
	// The play's context does not end with ctx: the end of ctx first
	// marks the play handed back, so that its publisher refuses the
	// events the stop makes, and only then stops it.
	jctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	h := &held{attempt: j.Attempt, cancel: cancel, kick: make(chan struct{}, 1)}
	cs.add(j.ID, h)
	defer cs.remove(j.ID, h)
	handBack := context.AfterFunc(ctx, func() {
		h.back.Store(true)
		cancel(errHandedBack)
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel(nil)
	// The lease runs from the delivery, not from when the heartbeat's
	// goroutine first runs: a late start is a pause too.
	delivered := b.now()
	wg.Go(func() { b.heartbeat(jctx, msg, j, h, delivered) })
	rep = callPlay(jctx, j, play)
	handBack()
	return rep, h.stopped()
}

// heartbeat tells the server the job is in progress every third of
// AckWait. After a reconnection (a kick) it first checks the job, until a
// check gets an answer: a takeover stops the play as lost, a cancel
// request cancels it, and otherwise a heartbeat goes at once rather than
// at the next tick.
//
// A tick that finds more than half of AckWait passed since the last
// heartbeat went means the process was paused (SIGSTOP, starvation) or
// could not send: the server may have delivered the job again, and the
// delivery may be claimed at any later time (a redelivered job waits for
// a free worker), so from then on every tick checks the job first. Half
// of AckWait, not all of it: the server counts from when a heartbeat
// arrives, which may be later than when it was sent, and a needless
// check costs one read.
func (b *Backend) heartbeat(ctx context.Context, msg jetstream.Msg, j job.Job, h *held, sent time.Time) {
	// A cancel request put before the job was held is in the bucket:
	// read it as the pair starts, not before, which would delay every
	// pair by a round trip. Unanswered (the connection dropped), it is
	// checked again until it is.
	check := false
	if _, err := b.kv.Get(ctx, cancelKey(j.ID)); err == nil {
		h.cancel(context.Canceled)
		return
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		check = ctx.Err() == nil
	}
	lapsed := false
	t := time.NewTicker(b.cfg.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.kick:
			check = true
		case <-ctx.Done():
			return
		}
		// One reading of the clock per tick: a heartbeat counts as sent
		// at the time read before it, so a pause that falls between the
		// lapse check and the send is still seen at the next tick.
		now := b.now()
		if now.Sub(sent) > b.cfg.AckWait/2 {
			lapsed = true
		}
		if check || lapsed {
			lost, cancelled, err := b.recheck(ctx, j)
			switch {
			case err != nil:
				continue // not answered yet: again at the next tick
			case lost:
				h.lost.Store(true)
				h.cancel(errLeaseLost)
				return
			case cancelled:
				h.cancel(context.Canceled)
				return
			}
			check = false
		}
		if msg.InProgress() == nil {
			sent = now
		}
	}
}

// recheck reads the job's status and its cancel key.
func (b *Backend) recheck(ctx context.Context, j job.Job) (lost, cancelled bool, err error) {
	st, _, err := b.read(ctx, j.ID)
	if err != nil {
		return false, false, err
	}
	if st.State != job.Running || st.Attempt != j.Attempt {
		return true, false, nil
	}
	_, err = b.kv.Get(ctx, cancelKey(j.ID))
	switch {
	case err == nil:
		return false, true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, false, nil
	}
	return false, false, err
}

// held is an attempt of a job a worker plays.
type held struct {
	// attempt is the delivery's number (job.Job.Attempt): a later
	// delivery of the job has a higher one.
	attempt int
	cancel  context.CancelCauseFunc
	kick    chan struct{} // asks its heartbeat to check the job; one pending at most
	lost    atomic.Bool   // another delivery took the job over
	back    atomic.Bool   // the draining worker hands the job back
}

// stopped returns why the attempt publishes nothing more: errLeaseLost,
// errHandedBack, or nil while it may.
func (h *held) stopped() error {
	switch {
	case h.lost.Load():
		return errLeaseLost
	case h.back.Load():
		return errHandedBack
	}
	return nil
}

// inflight holds the jobs a worker plays, each by its latest attempt.
type inflight struct {
	mu   sync.Mutex
	jobs map[string]*held
}

// add holds an attempt of the job. An older attempt this worker still
// holds was delivered again to another of its slots, which took the job
// by compare-and-swap: the older one is stopped as lost.
func (c *inflight) add(jobID string, h *held) {
	c.mu.Lock()
	old := c.jobs[jobID]
	c.jobs[jobID] = h
	c.mu.Unlock()
	if old != nil {
		old.lost.Store(true)
		old.cancel(errLeaseLost)
	}
}

// remove lets go of the attempt h, unless a newer one replaced it.
func (c *inflight) remove(jobID string, h *held) {
	c.mu.Lock()
	if c.jobs[jobID] == h {
		delete(c.jobs, jobID)
	}
	c.mu.Unlock()
}

func (c *inflight) get(jobID string) *held {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[jobID]
}

func (c *inflight) fire(jobID string) {
	c.mu.Lock()
	h := c.jobs[jobID]
	c.mu.Unlock()
	if h != nil {
		h.cancel(context.Canceled)
	}
}

// kickAll asks every held job's heartbeat to check its job.
func (c *inflight) kickAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.jobs {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// watchCancels subscribes to the puts of the bucket's cancel keys: one
// subscription for the worker instead of a watch per job.
func (b *Backend) watchCancels(cs *inflight) (*nats.Subscription, error) {
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
