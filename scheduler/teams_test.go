package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_ManyConfigsAndNamedPairsAllComplete submits jobs of more distinct
// configs than the scheduler keeps Teams for (Pairs+8), each config twice,
// and jobs whose config names its pair (played on their own): every job
// completes with its own pair and answer, and Shutdown leaves no goroutine
// (TestMain's goleak) once the Teams it closed are gone.
func TestO8_ManyConfigsAndNamedPairsAllComplete(t *testing.T) {
	const pairs, configs = 2, 24
	s := newScheduler(t, scheduler.Config{Pairs: pairs, Queue: 4 * configs, Retain: 4 * configs})
	ctx := context.Background()
	var ids []string
	for i := range configs {
		cfg := relay(t, cycling("Draft."), cycling("OK."))
		named := *cfg
		named.ID = "named-" + string(rune('a'+i))
		for _, c := range []*orchestrator.Config{cfg, cfg, &named} {
			id, err := s.Submit(ctx, scheduler.Job{Pair: c})
			require.NoError(t, err)
			ids = append(ids, id)
		}
	}
	require.NoError(t, s.Close(ctx))
	for _, id := range ids {
		in, err := s.Get(id)
		require.NoError(t, err)
		require.Equal(t, scheduler.Completed, in.State, "%s: %v", id, in.Err)
		require.Equal(t, "OK.", in.Result.Final.Text())
	}
	require.Equal(t, uint64(3*configs), s.Stats().Completed)
}
