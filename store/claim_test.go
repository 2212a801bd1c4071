package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// A host that resumes an interrupted pair claims it: the pair shows
// running while the claim's open lives, a second claim meanwhile is
// refused, and the pair is interrupted again once that open is gone.
func TestR3_ResumingHostClaimsAnInterruptedPairOnce(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	l := newLog(t, "pair-1", st)
	_, err = l.Append(ctx, eventlog.Record{Kind: "pair.started", Time: time.Unix(0, 0),
		Payload: raw(t, `{"pair_id":"pair-1","plan_id":"plan-1","workers":{"first":"a","second":"b"}}`)})
	require.NoError(t, err)
	require.ErrorIs(t, st.ClaimPair(ctx, "pair-1"), store.ErrClaimed, "its own live open records it")
	require.NoError(t, st.Close())

	a := open(t, path)
	rec, err := a.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, rec.Summary.Status)
	require.NoError(t, a.ClaimPair(ctx, "pair-1"))
	rec, err = a.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, rec.Summary.Status)

	b, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.ErrorIs(t, b.ClaimPair(ctx, "pair-1"), store.ErrClaimed)
	require.ErrorIs(t, b.ClaimPair(ctx, "pair-2"), store.ErrNotFound)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	c := open(t, path)
	rec, err = c.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, rec.Summary.Status, "the claiming open went without a terminal")
	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	require.ErrorIs(t, ro.ClaimPair(ctx, "pair-1"), store.ErrReadOnly)
}
