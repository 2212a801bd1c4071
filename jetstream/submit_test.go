package jetstream

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
)

// TestD1_ASubmitTheStreamRefusesKeepsNothing: a job the jobs stream
// refuses (it is full, and discards new jobs) is not left queued: Submit
// returns ErrRefused, the job is not found (Await does not wait for it),
// and once the stream has room the same ID is submitted again and played.
func TestD1_ASubmitTheStreamRefusesKeepsNothing(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	cfg := testConfig(connect(t, s.ClientURL()), "full")
	cfg.MaxJobs = 2
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	submitN(t, ctx, b, "fits", "ok", 2)

	_, err = b.Submit(ctx, job.Job{ID: "refused", Spec: []byte("ok")})
	require.ErrorIs(t, err, ErrRefused)
	_, err = b.Status(ctx, "refused")
	require.ErrorIs(t, err, job.ErrNotFound)
	_, err = b.Await(ctx, "refused")
	require.ErrorIs(t, err, job.ErrNotFound)

	require.NoError(t, b.stream.Purge(ctx))
	st, err := b.Submit(ctx, job.Job{ID: "refused", Spec: []byte("ok")})
	require.NoError(t, err)
	require.Equal(t, job.Queued, st.State)
	work(t, b, scripted)
	st, err = b.Await(ctx, "refused")
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State)
}

// TestD1_SubmitAgainAfterAnUncertainOutcomeQueuesTheJobOnce: a Submit
// whose outcome was uncertain (its ack lost, its context done) left the
// job queued, stored or not. Submitting the same ID and spec again
// within a minute publishes it again, which the stream stores once, and
// returns its status; another spec under that ID is refused, and so is
// the same spec later than that or once the job has left the queue.
func TestD1_SubmitAgainAfterAnUncertainOutcomeQueuesTheJobOnce(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "again"))
	require.NoError(t, err)
	inUse := func(err error) {
		t.Helper()
		var be *bound.Error
		require.True(t, errors.As(err, &be), "a job ID in use: %v", err)
	}
	msgs := func() uint64 {
		t.Helper()
		info, err := b.stream.Info(ctx)
		require.NoError(t, err)
		return info.State.Msgs
	}

	// Queued, never stored: the status is there, the message is not.
	rev, err := b.kv.Create(ctx, stateKey("lost"), encodeQueued(job.Status{ID: "lost", State: job.Queued, Submitted: time.Now().UTC()}, []byte("ok")))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "lost", Spec: []byte("other")})
	inUse(err)
	require.Zero(t, msgs())
	st, err := b.Submit(ctx, job.Job{ID: "lost", Spec: []byte("ok")})
	require.NoError(t, err)
	require.Equal(t, job.Queued, st.State)
	require.Equal(t, rev, st.Seq)
	require.Equal(t, uint64(1), msgs())

	// Queued over a minute ago: sent again, it could be stored twice.
	_, err = b.kv.Create(ctx, stateKey("old"), encodeQueued(job.Status{ID: "old", State: job.Queued, Submitted: time.Now().Add(-2 * maxUnconfirmed).UTC()}, []byte("ok")))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "old", Spec: []byte("ok")})
	inUse(err)
	require.Equal(t, uint64(1), msgs())

	// Stored, its ack lost: submitted again, stored once.
	_, err = b.Submit(ctx, job.Job{ID: "stored", Spec: []byte("ok")})
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "stored", Spec: []byte("ok")})
	require.NoError(t, err)
	require.Equal(t, uint64(2), msgs())

	tm := watchTerminals(t, b)
	work(t, b, scripted)
	for _, id := range []string{"lost", "stored"} {
		st, err := b.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, job.Completed, st.State, id)
		_, err = b.Submit(ctx, job.Job{ID: id, Spec: []byte("ok")})
		inUse(err)
	}
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	require.Equal(t, map[string]int{"lost": 1, "stored": 1}, tm.count)
}
