package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/store"
)

// A run that plays in a stored pair need not be told to the store itself:
// the pair's timeline holds each of its events, relayed, and the store
// reads the run's log back out of those rows, byte for byte what the run
// printed live, with the run's summary and calls as before.
func TestK16_ARunStoredOnlyInItsPairsTimelineReplaysByteForByte(t *testing.T) {
	ctx := context.Background()
	st := open(t, dbPath(t))
	p := runPairOnce(t, st, "pair-1")

	for _, run := range p.runs {
		n, err := store.OwnRows(ctx, st, run)
		require.NoError(t, err)
		require.Zero(t, n, "rows of its own for %s", run)

		want := p.live.lines(run)
		require.NotEmpty(t, want)
		require.Equal(t, string(want), string(replay(t, st, run)), "replay of %s", run)

		rec, err := st.Run(ctx, run)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, rec.Summary.Status)
		require.Equal(t, p.pairID, rec.Summary.PairID)
		var got []byte
		for i, en := range rec.Events {
			require.Equal(t, uint64(i+1), en.Event.Seq())
			require.Equal(t, run, en.Log)
			require.False(t, en.Relayed)
			require.NotNil(t, en.Payload, "typed payload of %s", en.Event.Kind())
			got = append(append(got, en.Event.AppendJSON(nil)...), '\n')
		}
		require.Equal(t, string(want), string(got))
	}
	rec, err := st.Run(ctx, p.runs[0])
	require.NoError(t, err)
	require.Len(t, rec.Calls, 1)
	require.Equal(t, store.CallCompleted, rec.Calls[0].Status)

	// The pair's own replay is unchanged.
	require.Equal(t, string(p.live.lines(p.pairID)), string(replay(t, st, p.pairID)))
}

// A run with rows of its own is read from them, even when its pair's
// timeline relays it too.
func TestK16_ARunsOwnRowsAreReadFirst(t *testing.T) {
	ctx := context.Background()
	st := open(t, dbPath(t))
	p := runPair(t, st, "pair-1")
	for _, run := range p.runs {
		n, err := store.OwnRows(ctx, st, run)
		require.NoError(t, err)
		require.Positive(t, n)
		require.Equal(t, string(p.live.lines(run)), string(replay(t, st, run)))
	}
}
