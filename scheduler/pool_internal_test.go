package scheduler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestO8_JobContextCancelsOnlyThePlayingJob: a slot's jobs share its context
// until one is cancelled. Cancelling a job that has ended leaves the next
// job's context alone; cancelling the playing one cancels it, and the job
// after it gets a live context; once the scheduler's context has ended,
// every job's has.
func TestO8_JobContextCancelsOnlyThePlayingJob(t *testing.T) {
	base, cancelBase := context.WithCancel(context.Background())
	c := &jobCtx{base: base}
	defer c.close()
	a, b, d := &run{slot: c}, &run{slot: c}, &run{slot: c}

	c.begin(a)
	c.end(a)
	c.begin(b)
	a.cancel() // ended: does nothing
	require.NoError(t, b.ctx.Err())
	require.Same(t, a.ctx, b.ctx, "one context serves jobs until one is cancelled")

	b.cancel()
	require.ErrorIs(t, b.ctx.Err(), context.Canceled)
	c.end(b)
	c.begin(d)
	require.NoError(t, d.ctx.Err(), "a cancelled job's context is not reused")
	c.end(d)

	cancelBase()
	e := &run{slot: c}
	c.begin(e)
	require.Error(t, e.ctx.Err())
}

// TestPendingBufferReusedWhenEmptied: a submission buffer that a slot
// empties job by job keeps its array, so a submission appends without
// allocating.
func TestPendingBufferReusedWhenEmptied(t *testing.T) {
	// On the heap, as Scheduler.pending is: the compiler may give a
	// local slice that does not escape a stack array to grow into.
	h := &Scheduler{pending: make([]*record, 0, 1)}
	heldPending = h
	defer func() { heldPending = nil }()
	r := &record{}
	allocs := testing.AllocsPerRun(100, func() {
		h.pending = append(h.pending, r)
		h.pending = popOldest(h.pending)
	})
	require.Zero(t, allocs)
	pending := h.pending
	a, b := &record{seq: 1}, &record{seq: 2}
	pending = append(pending[:0], a, b)
	array := pending[:2]
	pending = popOldest(pending)
	require.Equal(t, []*record{b}, pending)
	require.Nil(t, array[0], "a taken job is not kept alive")
	pending = popOldest(pending)
	require.Empty(t, pending)
	require.Nil(t, array[1])
}

// heldPending keeps TestPendingBufferReusedWhenEmptied's buffer on the heap.
var heldPending *Scheduler
