package scheduler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobContextCancelsOnlyThePlayingJob: a slot's jobs share its context
// until one is cancelled. Cancelling a job that has ended leaves the next
// job's context alone; cancelling the playing one cancels it, and the job
// after it gets a live context; once the scheduler's context has ended,
// every job's has.
func TestJobContextCancelsOnlyThePlayingJob(t *testing.T) {
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
