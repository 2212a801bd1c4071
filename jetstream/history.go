package jetstream

import (
	"context"
	"errors"
	"slices"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// StatusQueued is the store status of a job no worker has started.
const StatusQueued store.Status = "queued"

// Pair returns the pair's record as the job's status and the events
// stream hold it: its summary and its timeline, without the runs and
// calls that only a worker's store records. An unknown pair is
// store.ErrNotFound, so that a reader of history need not know which
// kind it reads.
func (b *Backend) Pair(ctx context.Context, pairID string) (store.PairRecord, error) {
	st, err := b.Status(ctx, pairID)
	if errors.Is(err, job.ErrNotFound) {
		return store.PairRecord{}, store.ErrNotFound
	}
	if err != nil {
		return store.PairRecord{}, err
	}
	rec := store.PairRecord{Summary: summary(st)}
	for e, err := range b.Events(ctx, pairID, 0, false) {
		if errors.Is(err, job.ErrNotFound) {
			break // no event yet
		}
		if err != nil {
			return store.PairRecord{}, err
		}
		rec.Events = append(rec.Events, store.Entry{Log: pairID, Event: e})
	}
	// The worker writes the job's terminal status after the pair's
	// terminal is stored: until it has, the timeline says how it ended.
	if n := len(rec.Events); n > 0 && (rec.Summary.Status == store.StatusRunning || rec.Summary.Status == StatusQueued) {
		switch rec.Events[n-1].Event.Kind() {
		case orchestrator.KindCompleted:
			rec.Summary.Status = store.StatusCompleted
		case orchestrator.KindFailed:
			rec.Summary.Status = store.StatusFailed
		case orchestrator.KindCancelled:
			rec.Summary.Status = store.StatusCancelled
		}
	}
	return rec, nil
}

// ListPairs returns the jobs' summaries, newest first.
func (b *Backend) ListPairs(ctx context.Context, o store.ListOptions) ([]store.PairSummary, error) {
	n := o.Limit
	switch {
	case n == 0:
		n = store.DefaultListLimit
	case n < 0 || n > store.MaxListLimit:
		return nil, errors.New("jetstream: list limit out of range")
	}
	var all []store.PairSummary
	for st := range b.Statuses(ctx, 0) {
		if s := summary(st); o.Status == "" || s.Status == o.Status {
			all = append(all, s)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(all)
	return all[:min(n, len(all))], nil
}

func summary(st job.Status) store.PairSummary {
	s := store.PairSummary{ID: st.ID, Reason: st.Reason, Started: st.Started, Ended: st.Ended}
	switch st.State {
	case job.Queued:
		s.Status = StatusQueued
	case job.Running:
		s.Status = store.StatusRunning
	case job.Completed:
		s.Status = store.StatusCompleted
	case job.Failed:
		s.Status = store.StatusFailed
	case job.Cancelled:
		s.Status = store.StatusCancelled
	}
	if s.Started.IsZero() {
		s.Started = st.Submitted
	}
	return s
}
