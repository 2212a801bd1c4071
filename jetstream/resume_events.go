package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// ResumeFromEvents returns a WorkerConfig.Resume that continues a job's
// pair from the timeline the events stream holds, on any machine: no
// store is shared. The pair goes on as orchestrator.Resume continues it,
// after its last completed run, with no model output the stream holds
// asked for again and no tool outcome it holds run again. A mutating
// call whose start the stream holds without an outcome ends the job
// failed with reason orchestrator.ReasonUncertainCall, naming the call,
// unless its tool is declared idempotent; any other refusal ends it
// failed with the refusal's reason.
//
// The stream holds every call that may have taken effect: a Publisher
// returns from a call's tool.started only once that event, and every
// event before it, is stored, and only then does the call run. So a pair
// of which the stream holds nothing has run no such call, and is played
// from its start; a pair whose terminal the stream holds ended before
// its worker could say so, and ends the job as it ended.
//
// The continuation is published to the same subject, its first batch on
// condition that the subject's last message is still the one the
// timeline was rebuilt from, and every message names this attempt, so
// that a reader from cursor 0 sees one timeline without a gap or a
// duplicate: what the superseded attempt publishes after the
// continuation's first message, before it notices, is skipped. build must build the pair as
// its first play built it; the publisher is added to its required
// timeline observers, which must not include a store that has not
// recorded the pair's beginning.
func (b *Backend) ResumeFromEvents(build BuildFunc, tc TimelineConfig) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		fail := func(reason string, err error) job.Report {
			rep.Reason, rep.Error = reason, err.Error()
			return rep
		}
		rec, err := b.stored(ctx, j.ID)
		if err != nil {
			if ctx.Err() != nil { // cancelled, or draining
				rep.State = job.Cancelled
				return fail(job.ReasonCancelled, err)
			}
			return fail(orchestrator.ReasonTimelineInvalid, err)
		}
		if n := len(rec.events); n > 0 && orchestrator.Terminal(rec.events[n-1].Kind) {
			return endedReport(rep, rec.events[n-1])
		}
		pub, err := b.Timeline(j.ID, tc)
		if err != nil {
			return fail("spec_refused", err)
		}
		pub.last, pub.fence, pub.fenced = rec.lastSeq, rec.streamSeq, true
		cfg, closeFn, err := build(ctx, j)
		if err != nil {
			return fail("spec_refused", err)
		}
		if closeFn != nil {
			defer closeFn()
		}
		cfg.Timeline.Required = append(slices.Clone(cfg.Timeline.Required), pub)
		// A pair's terminal publishes what is left; a refused one
		// published nothing.
		defer func() { _ = pub.Flush(context.WithoutCancel(ctx)) }()
		if len(rec.events) == 0 {
			pair, err := orchestrator.Run(ctx, cfg)
			return resumeReport(ctx, rep, pair, err)
		}
		pair, err := orchestrator.RunResumed(ctx, orchestrator.ResumeConfig{Pair: cfg, Timeline: rec.events})
		return resumeReport(ctx, rep, pair, err)
	}
}

// resumeReport reports how a resumed (or started) pair ended, or why it
// was refused.
func resumeReport(ctx context.Context, rep job.Report, pair *orchestrator.Pair, err error) job.Report {
	if err == nil {
		return PairReport(rep, pair)
	}
	rep.Error = err.Error()
	var re *orchestrator.ResumeError
	switch {
	case errors.As(err, &re):
		rep.Reason = re.Reason
	case ctx.Err() != nil:
		rep.State, rep.Reason = job.Cancelled, job.ReasonCancelled
	default:
		rep.Reason = "refused"
	}
	return rep
}

// endedReport reports a pair whose terminal is recorded.
func endedReport(rep job.Report, terminal orchestrator.RecordedEvent) job.Report {
	switch terminal.Kind {
	case orchestrator.KindCompleted:
		rep.State, rep.Reason = job.Completed, "completed"
		return rep
	case orchestrator.KindCancelled:
		rep.State, rep.Reason = job.Cancelled, job.ReasonCancelled
		return rep
	}
	rep.Reason, rep.Error = "failed", "the pair failed before its worker could say so"
	if pl, err := orchestrator.DecodePayload(terminal.Kind, terminal.Payload); err == nil {
		if e, ok := pl.(orchestrator.Ended); ok {
			rep.Reason = e.Reason.String()
		}
	}
	return rep
}

// storedTimeline is a pair's timeline as the events stream holds it.
type storedTimeline struct {
	events    []orchestrator.RecordedEvent
	lastSeq   uint64 // of the last event; 0 for none
	streamSeq uint64 // of the subject's last message; 0 for none
}

// stored reads the pair's timeline from the events stream, each event
// once, as Events reads it (no message of a superseded attempt after a
// newer attempt's first), and the stream sequence of the subject's last
// message, whichever attempt published it. A gap is ErrGap; more than
// orchestrator.MaxResumeEvents events is refused.
func (b *Backend) stored(ctx context.Context, pairID string) (storedTimeline, error) {
	var st storedTimeline
	if err := id.Check("pair.id", pairID); err != nil {
		return st, err
	}
	var seen attempts
	err := b.readSubject(ctx, b.eventsSubject(pairID), 0, false, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) (bool, error) {
		// The fence is the subject's last message, a superseded one
		// included: the server compares it with whatever was stored.
		st.streamSeq = meta.Sequence.Stream
		stale, err := seen.superseded(msg.Headers())
		if err != nil || stale {
			return err == nil, err
		}
		evs, err := decodeBatch(msg.Data())
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			switch {
			case e.Seq() <= st.lastSeq:
				continue // stored twice
			case e.Seq() > st.lastSeq+1:
				return false, ErrGap
			case len(st.events) >= orchestrator.MaxResumeEvents:
				return false, fmt.Errorf("jetstream: more than %d events recorded", orchestrator.MaxResumeEvents)
			}
			raw, ok := e.Payload().(eventlog.Raw)
			if !ok {
				return false, ErrBadBatch
			}
			st.events = append(st.events, orchestrator.RecordedEvent{Seq: e.Seq(), Kind: e.Kind(), Payload: raw.Bytes()})
			st.lastSeq = e.Seq()
		}
		return true, nil
	})
	if errors.Is(err, job.ErrNotFound) {
		return storedTimeline{}, nil
	}
	return st, err
}
