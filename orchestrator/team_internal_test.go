package orchestrator

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/workers"
)

// A Team lends the crew its last pair gave back, and never one a stop shut
// down.
func TestTeamLendsTheSameCrewUntilAStop(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "w", Model: "m", MaxTurns: 2})
	require.NoError(t, err)
	worker := func(role string) workers.Config {
		p := enginetest.NewProvider(enginetest.Answer("ok"))
		p.Cycle = true
		return workers.Config{Role: role, Definition: def,
			Engine: engine.Config{Provider: p, IDs: &id.Counter{}, Clock: &enginetest.Clock{}}}
	}
	cfg := Config{Plans: plans, First: worker("a"), Second: worker("b"), Pattern: Relay,
		Timeline: TimelineConfig{Delivery: AfterRun}}
	team, err := NewTeam(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	play := func(pairID string) *Pair {
		p, err := team.Run(ctx, pairID, "t")
		require.NoError(t, err)
		_, _ = p.Wait(ctx)
		return p
	}
	a, b := play("p-1"), play("p-2")
	require.Same(t, a.crew, b.crew, "the second pair was not lent the first one's crew")

	team.n.Started = func(p *Pair) { p.Cancel() } // the settings each pair copies
	stopped := play("p-3")
	require.Same(t, a.crew, stopped.crew)
	team.n.Started = nil
	c := play("p-4")
	require.NotSame(t, a.crew, c.crew, "a crew whose engines a stop shut down was lent again")

	require.NoError(t, team.Close(ctx))
	require.Empty(t, team.idle)
	require.Zero(t, team.busy)
	msg, err := message.User("x")
	require.NoError(t, err)
	_, err = c.crew.workers[0].Run(ctx, engine.Input{Message: msg})
	require.ErrorIs(t, err, engine.ErrClosed, "Close closes the idle crews' engines")
}
