package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_JobsIsAJobBackend: the scheduler seen through job.Backend gives
// the same jobs, states and order as its own methods, a cancelled queued
// job's reason, and job.ErrNotFound for a job it does not know.
func TestO8_JobsIsAJobBackend(t *testing.T) {
	ctx := context.Background()
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	b := s.Jobs()
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	st, err := b.Status(ctx, j1)
	require.NoError(t, err)
	require.Equal(t, job.Running, st.State)
	require.Equal(t, 1, st.Attempt)
	require.NoError(t, b.Cancel(ctx, j2))
	st, err = b.Await(ctx, j2)
	require.NoError(t, err)
	require.Equal(t, job.Cancelled, st.State)
	require.Equal(t, job.ReasonCancelled, st.Reason)
	require.Zero(t, st.Attempt, "never started")

	block.Release()
	st, err = b.Await(ctx, j1)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State)
	require.Empty(t, st.Error)
	var ids []string
	for st, err := range b.Statuses(ctx, 0) {
		require.NoError(t, err)
		ids = append(ids, st.ID)
	}
	require.Equal(t, []string{j1, j2}, ids)

	_, err = b.Status(ctx, "job-unknown")
	require.ErrorIs(t, err, job.ErrNotFound)
	require.ErrorIs(t, b.Cancel(ctx, "job-unknown"), scheduler.ErrNotFound)
}
