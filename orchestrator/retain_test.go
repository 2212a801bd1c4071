package orchestrator_test

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// A host that keeps relayed events keeps nothing else of their pair: once
// the host lets go of a pair, it is collected, whether it was a pair of its
// own or one of a Team's, a relay or a review loop of four runs, with
// either delivery; and once it lets go of a closed Team, so is the Team.
func TestRelayedEventsKeepNoPairAlive(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		for _, pattern := range []orchestrator.Pattern{orchestrator.Relay, orchestrator.ReviewLoop} {
			t.Run(d.String()+"/"+pattern.String(), func(t *testing.T) { relayedKeepNothing(t, d, pattern) })
		}
	}
}

func relayedKeepNothing(t *testing.T, d orchestrator.Delivery, pattern orchestrator.Pattern) {
	h := teamHarness(t, d)
	if pattern == orchestrator.ReviewLoop {
		h = newHarness(t, orchestrator.ReviewLoop,
			script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two.")},
			script{enginetest.Answer("Make it shorter."), enginetest.Answer("Good.\nAPPROVED")})
		h.first.Cycle, h.second.Cycle = true, true
		h.cfg.Timeline.Delivery = d
	}
	h.cfg.Timeline.Required = nil // the host records no timeline
	team, err := orchestrator.NewTeam(h.cfg)
	require.NoError(t, err)
	var kept []orchestrator.Relayed
	var pairs []weak.Pointer[orchestrator.Pair]
	play := func(run func() (*orchestrator.Pair, error)) {
		p, err := run()
		require.NoError(t, err)
		_, err = p.Wait(context.Background())
		require.NoError(t, err)
		started := relayed(timeline(t, p), event.KindRunStarted)
		require.NotEmpty(t, started)
		kept = append(kept, started...)
		pairs = append(pairs, weak.Make(p))
	}
	for range 3 {
		play(func() (*orchestrator.Pair, error) { return orchestrator.Run(context.Background(), h.cfg) })
		play(func() (*orchestrator.Pair, error) { return team.Run(context.Background(), "pair-t", task) })
	}
	runtime.GC()
	for i, wp := range pairs {
		require.True(t, wp.Value() == nil, "pair %d is kept alive", i)
	}
	require.NoError(t, team.Close(context.Background()))
	wt := weak.Make(team)
	team = nil
	runtime.GC()
	require.True(t, wt.Value() == nil, "the closed team is kept alive")
	for _, r := range kept {
		require.Contains(t, []string{"writer", "reviewer"}, r.Worker())
	}
}
