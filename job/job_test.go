package job_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
)

// TestStatesCrossAProcessBoundaryAsText: every state survives its text
// form, and a name that is no state is refused, not read as zero.
func TestStatesCrossAProcessBoundaryAsText(t *testing.T) {
	for s := job.Queued; s <= job.Cancelled; s++ {
		b, err := s.MarshalText()
		require.NoError(t, err)
		var got job.State
		require.NoError(t, got.UnmarshalText(b))
		require.Equal(t, s, got)
		require.Equal(t, s >= job.Completed, s.Terminal())
	}
	var s job.State
	require.ErrorIs(t, s.UnmarshalText([]byte("done")), job.ErrBadState)
	require.ErrorIs(t, s.UnmarshalText(nil), job.ErrBadState)
	_, err := job.State(0).MarshalText()
	require.ErrorIs(t, err, job.ErrBadState)
}

func FuzzStateText(f *testing.F) {
	f.Add([]byte("queued"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s job.State
		if s.UnmarshalText(b) == nil {
			out, err := s.MarshalText()
			require.NoError(t, err)
			require.Equal(t, string(b), string(out))
		}
	})
}
