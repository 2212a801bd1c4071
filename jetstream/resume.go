package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// BuildFunc builds a job's pair as its first play built it: the same
// pair ID (the job's), workers, pattern, task and plan source, recording
// into the same store. close, if not nil, releases what the pair holds
// once it has ended.
type BuildFunc func(ctx context.Context, j job.Job) (cfg orchestrator.Config, close func(), err error)

// ResumeFromStore returns a WorkerConfig.Resume that continues a job's
// pair from the timeline st recorded (orchestrator.Resume): after its
// last completed run, with no recorded model output asked for again and
// no recorded tool outcome run again. A mutating call that started
// without a recorded outcome ends the job failed with reason
// orchestrator.ReasonUncertainCall, naming the call, unless its tool is
// declared idempotent; any other refusal ends it failed with the
// refusal's reason.
//
// st must be the store the job's first worker recorded into: workers on
// one machine sharing one SQLite file. A job whose pair st does not hold
// (it was played on another machine) ends failed with reason
// job.ReasonInterrupted.
func ResumeFromStore(st *store.Store, build BuildFunc) PlayFunc {
	return resumeFromStore(st, build, nil)
}

// ResumeFromStoreOrEvents returns a WorkerConfig.Resume for a worker
// that records into st: a pair that st holds is resumed from st, as
// ResumeFromStore does, and any other from the events stream, as
// ResumeFromEvents does with bare, which builds the pair without st. A
// pair resumed from st has its timeline published too: first what st
// recorded and the stream lacks (the batches its first worker had not
// sent), then the continuation, so that a reader of the stream sees it
// whole.
func (b *Backend) ResumeFromStoreOrEvents(st *store.Store, build, bare BuildFunc, tc TimelineConfig) PlayFunc {
	fromEvents := b.ResumeFromEvents(bare, tc)
	fromStore := resumeFromStore(st, build, func(ctx context.Context, rec store.PairRecord) (*Publisher, error) {
		return b.continuation(ctx, rec, tc)
	})
	return func(ctx context.Context, j job.Job) job.Report {
		if _, err := st.Pair(ctx, j.ID); errors.Is(err, store.ErrNotFound) {
			return fromEvents(ctx, j)
		}
		return fromStore(ctx, j)
	}
}

// continuation returns a publisher of the pair's timeline that has
// published what rec holds past the stream's last event, fenced on the
// stream's last message.
func (b *Backend) continuation(ctx context.Context, rec store.PairRecord, tc TimelineConfig) (*Publisher, error) {
	have, err := b.stored(ctx, rec.Summary.ID)
	if err != nil {
		return nil, err
	}
	pub, err := b.Timeline(rec.Summary.ID, tc)
	if err != nil {
		return nil, err
	}
	pub.last, pub.fence, pub.fenced = have.lastSeq, have.streamSeq, true
	for _, en := range rec.Events {
		if en.Event.Seq() <= have.lastSeq {
			continue
		}
		if err := pub.Observe(ctx, en.Event); err != nil {
			return nil, err
		}
	}
	return pub, nil
}

func resumeFromStore(st *store.Store, build BuildFunc, publish func(context.Context, store.PairRecord) (*Publisher, error)) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		fail := func(reason string, err error) job.Report {
			rep.Reason, rep.Error = reason, err.Error()
			return rep
		}
		rec, err := st.Pair(ctx, j.ID)
		if errors.Is(err, store.ErrNotFound) {
			return fail(job.ReasonInterrupted, errors.New("the worker playing the job stopped answering, and this worker's store has no record of its pair"))
		}
		if err != nil {
			return fail("store", err)
		}
		// With publish, what rec holds and the stream lacks is
		// published: for a pair that ended, once; for one that goes
		// on, by the worker that claimed it, before its continuation.
		var pub *Publisher
		backfill := func() error {
			if publish == nil {
				return nil
			}
			var err error
			pub, err = publish(ctx, rec)
			return err
		}
		defer func() {
			if pub != nil {
				_ = pub.Flush(context.WithoutCancel(ctx))
			}
		}()
		switch rec.Summary.Status {
		case store.StatusCompleted:
			// The pair ended before its worker could say so.
			_ = backfill()
			rep.State, rep.Reason = job.Completed, "completed"
			return rep
		case store.StatusCancelled:
			_ = backfill()
			rep.State, rep.Reason = job.Cancelled, job.ReasonCancelled
			return rep
		case store.StatusFailed:
			_ = backfill()
			return fail("failed", errors.New("the pair failed before its worker could say so"))
		}
		// Of two workers that find the pair, one continues it; a pair
		// still recorded by a live process is not taken from it.
		if err := st.ClaimPair(ctx, j.ID); err != nil {
			if errors.Is(err, store.ErrClaimed) {
				return fail(job.ReasonInterrupted, err)
			}
			return fail("store", err)
		}
		if err := backfill(); err != nil {
			return fail("events", err)
		}
		timeline, runLogs, err := recorded(ctx, st, rec)
		if err != nil {
			return fail(orchestrator.ReasonTimelineInvalid, err)
		}
		cfg, closeFn, err := build(ctx, j)
		if err != nil {
			return fail("spec_refused", err)
		}
		if closeFn != nil {
			defer closeFn()
		}
		if pub != nil {
			cfg.Timeline.Required = append(slices.Clone(cfg.Timeline.Required), pub)
		}
		pair, err := orchestrator.RunResumed(ctx, orchestrator.ResumeConfig{Pair: cfg, Timeline: timeline, RunLogs: runLogs})
		if err != nil {
			var re *orchestrator.ResumeError
			if errors.As(err, &re) {
				return fail(re.Reason, re)
			}
			if ctx.Err() != nil {
				rep.State = job.Cancelled
			}
			return fail("refused", err)
		}
		return PairReport(rep, pair)
	}
}

// PairReport waits for pair to end and fills rep with how it ended.
func PairReport(rep job.Report, pair *orchestrator.Pair) job.Report {
	res, err := pair.Wait(context.Background())
	rep.Reason = res.Reason.String()
	switch {
	case err == nil:
		rep.State = job.Completed
	case res.Reason == orchestrator.ReasonCancelled:
		rep.State, rep.Error = job.Cancelled, err.Error()
	default:
		rep.State, rep.Error = job.Failed, err.Error()
	}
	return rep
}

// recorded reads the pair timeline and the own logs of its interrupted
// runs, which may be ahead of the timeline.
func recorded(ctx context.Context, st *store.Store, rec store.PairRecord) ([]orchestrator.RecordedEvent, map[id.Run][]orchestrator.RecordedEvent, error) {
	timeline, err := recordedEvents(rec.Events)
	if err != nil {
		return nil, nil, err
	}
	runLogs := map[id.Run][]orchestrator.RecordedEvent{}
	for _, run := range rec.Runs {
		if run.Status != store.StatusInterrupted {
			continue
		}
		rr, err := st.Run(ctx, run.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if runLogs[id.Run(run.ID)], err = recordedEvents(rr.Events); err != nil {
			return nil, nil, err
		}
	}
	return timeline, runLogs, nil
}

func recordedEvents(entries []store.Entry) ([]orchestrator.RecordedEvent, error) {
	if len(entries) > orchestrator.MaxResumeEvents {
		return nil, fmt.Errorf("jetstream: %d recorded events, at most %d", len(entries), orchestrator.MaxResumeEvents)
	}
	evs := make([]orchestrator.RecordedEvent, 0, len(entries))
	for _, en := range entries {
		raw, ok := en.Event.Payload().(eventlog.Raw)
		if !ok {
			return nil, fmt.Errorf("jetstream: recorded event %d has no payload", en.Event.Seq())
		}
		evs = append(evs, orchestrator.RecordedEvent{Seq: en.Event.Seq(), Kind: en.Event.Kind(), Payload: raw.Bytes()})
	}
	return evs, nil
}
