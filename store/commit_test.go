package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// An event whose COMMIT fails is not acknowledged, and is not in the
// store afterwards. The failure is injected at the commit itself because
// the other tests make the INSERT fail, which would not catch a store
// that acknowledges before its commit returns.
func TestK16_AFailedCommitIsNotAcknowledged(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	l := newLog(t, "run-1", st)
	appendAll(t, l, event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"})

	require.NoError(t, store.FailCommits(ctx, st))
	_, err = l.Append(ctx, event.Record(t0, event.TurnStarted{RunID: "run-1", TurnID: "turn-1", Index: 1}))
	var oe *eventlog.ObserverError
	require.ErrorAs(t, err, &oe, "the store refused the event whose commit failed")
	require.Equal(t, uint64(2), oe.Seq)
	require.ErrorContains(t, oe.Err, "store: commit")
	require.NoError(t, st.Close())

	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	run, err := ro.Run(ctx, "run-1")
	require.NoError(t, err)
	require.Len(t, run.Events, 1, "only the acknowledged event is recorded")
}
