package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/model"
)

func TestK22_TextRunExactEvents(t *testing.T) {
	f := newFixture(t, fixtureConfig{script: [][]model.Item{{enginetest.Text("Hel"), enginetest.Text("lo."), enginetest.Done(12, 3)}}})
	r, res, err := f.run(t, 4)
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)
	require.Equal(t, "Hello.", res.Final.Text())
	require.Equal(t, 1, res.Turns)
	require.Equal(t, int64(12), res.Usage.Input())
	require.Equal(t, int64(3), res.Usage.Output())
	evs := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.text_delta", "model.text_delta",
		"model.completed", "turn.completed", "run.completed",
	}, kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, uint64(8), res.LastSeq)
	require.Equal(t, kinds(evs), f.rec.Kinds(), "the required observer saw every event in order")
	require.NoError(t, f.eng.Close(context.Background()))
}
