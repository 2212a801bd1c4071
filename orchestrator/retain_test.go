package orchestrator_test

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// A host that keeps relayed events keeps nothing else of their pair: once
// the host lets go of a pair, it is collected, whether it was a pair of its
// own or one of a Team's, with either delivery.
func TestRelayedEventsKeepNoPairAlive(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		t.Run(d.String(), func(t *testing.T) {
			h := teamHarness(t, d)
			h.cfg.Timeline.Required = nil // the host records no timeline
			team := newTeam(t, h.cfg)
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
			for _, r := range kept {
				require.Contains(t, []string{"writer", "reviewer"}, r.Worker())
			}
		})
	}
}
