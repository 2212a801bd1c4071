package jetstream

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	return b.PairReader(pairID)(ctx)
}

// PairReader returns a reader of the pair's record for one who reads it
// again while the pair runs (a stream following it): each call returns
// what Pair does, but with only the events stored since the call before
// (every event at the first), and reads only those from the events
// stream. A call that fails leaves the reader where it was. Calls must
// not overlap.
func (b *Backend) PairReader(pairID string) func(context.Context) (store.PairRecord, error) {
	r := &pairReader{b: b, pairID: pairID}
	return r.read
}

// pairReader is where a PairReader stands in the pair's timeline.
type pairReader struct {
	b      *Backend
	pairID string
	cur    timelineCursor
	next   uint64 // the stream sequence after the last message read
	last   string // the kind of the last event read
	ended  bool   // the pair's terminal is read
}

func (r *pairReader) read(ctx context.Context) (store.PairRecord, error) {
	parent := ctx // a deadline of its own is the caller's to see
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, submitWait)
		defer cancel()
	}
	// A connection lost while the timeline is read would leave the read
	// waiting for it: the read ends at the connection's change instead.
	_, changed := r.b.Health()
	ctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	read := make(chan struct{})
	defer close(read)
	go func() {
		select {
		case <-changed:
			lost(job.ErrUnavailable)
		case <-read:
		}
	}()
	rec, err := r.pair(ctx)
	if err != nil && errors.Is(context.Cause(ctx), job.ErrUnavailable) {
		return rec, fmt.Errorf("%w: the connection changed while the pair was read", job.ErrUnavailable)
	}
	if err != nil {
		return rec, unavailable(parent, err)
	}
	return rec, nil
}

func (r *pairReader) pair(ctx context.Context) (store.PairRecord, error) {
	st, err := r.b.Status(ctx, r.pairID)
	if errors.Is(err, job.ErrNotFound) {
		return store.PairRecord{}, store.ErrNotFound
	}
	if err != nil {
		return store.PairRecord{}, err
	}
	rec := store.PairRecord{Summary: summary(st)}
	// The reader moves on only once the read has succeeded.
	cur, next, last, ended := r.cur, r.next, r.last, r.ended
	if !ended {
		err = r.b.readSubject(ctx, r.b.eventsSubject(r.pairID), next, false, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) (bool, error) {
			evs, done, err := cur.take(msg)
			if err != nil {
				return false, err
			}
			next = meta.Sequence.Stream + 1
			for _, e := range evs {
				rec.Events = append(rec.Events, store.Entry{Log: r.pairID, Event: e})
				last = e.Kind()
			}
			ended = done
			return !done, nil
		})
		if err != nil && !errors.Is(err, job.ErrNotFound) { // not found: no event yet
			return store.PairRecord{}, err
		}
	}
	r.cur, r.next, r.last, r.ended = cur, next, last, ended
	// The worker writes the job's terminal status after the pair's
	// terminal is stored: until it has, the timeline says how it ended.
	if rec.Summary.Status == store.StatusRunning || rec.Summary.Status == StatusQueued {
		switch last {
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

// ListPairs returns the jobs' summaries, newest first. It holds no more
// than the summaries it returns while it reads the statuses.
func (b *Backend) ListPairs(ctx context.Context, o store.ListOptions) ([]store.PairSummary, error) {
	n := o.Limit
	switch {
	case n == 0:
		n = store.DefaultListLimit
	case n < 0 || n > store.MaxListLimit:
		return nil, errors.New("jetstream: list limit out of range")
	}
	newest := &byAge{}
	err := b.scan(ctx, func(st job.Status) {
		s := summary(st)
		if o.Status != "" && s.Status != o.Status {
			return
		}
		if newest.Len() < n {
			heap.Push(newest, aged{st.Submitted, s})
		} else if st.Submitted.After((*newest)[0].submitted) {
			(*newest)[0] = aged{st.Submitted, s}
			heap.Fix(newest, 0)
		}
	})
	if err != nil {
		return nil, err
	}
	all := make([]store.PairSummary, newest.Len())
	for i := len(all) - 1; i >= 0; i-- {
		all[i] = heap.Pop(newest).(aged).s
	}
	return all, nil
}

// aged is a summary and its job's submission time.
type aged struct {
	submitted time.Time
	s         store.PairSummary
}

// byAge is a heap of summaries, the oldest submission on top.
type byAge []aged

func (h byAge) Len() int           { return len(h) }
func (h byAge) Less(i, j int) bool { return h[i].submitted.Before(h[j].submitted) }
func (h byAge) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byAge) Push(x any)        { *h = append(*h, x.(aged)) }
func (h *byAge) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func summary(st job.Status) store.PairSummary {
	s := store.PairSummary{ID: st.ID, Reason: st.Reason, Started: st.Started, Ended: st.Ended, Submitted: st.Submitted}
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
