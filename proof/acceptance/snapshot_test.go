package acceptance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshotTrip(t *testing.T) {
	tr, err := CheckSnapshotTrip(context.Background(), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, 1, tr.Turns)
	require.Greater(t, tr.Events, int(tr.SuspendedAt))
	require.Positive(t, tr.SnapshotBytes)
}

// TestBreak_SnapshotResumedWithAForgetfulHost: resumed by a host whose ID
// source starts again, the run reuses a turn ID; its events differ from
// the uninterrupted run's, and the snapshot part fails saying where.
func TestBreak_SnapshotResumedWithAForgetfulHost(t *testing.T) {
	_, err := checkSnapshotTrip(context.Background(), t.TempDir(), true)
	requireBreak(t, err, PartSnapshot, "the resumed run's events differ from the uninterrupted run's", "line ")
	row := Row(PartSnapshot, "T", "pass evidence", err)
	require.Equal(t, ResultFail, row.Result)
	require.Contains(t, row.Evidence, "differ from the uninterrupted run's")
}
