package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// A run's history starts with room for as many messages as the engine's
// last run held: a text run after text runs reserves two, a run after a
// tool round reserves four. The hint never changes what a run holds.
func TestHistoryRoomFollowsTheLastRun(t *testing.T) {
	plans, err := enginetest.Plan("plan-1", enginetest.Echo())
	require.NoError(t, err)
	p := enginetest.NewProvider(
		enginetest.Answer("one"),
		[]model.Item{enginetest.Call("c1", "echo", `{"text":"x"}`), enginetest.Done(1, 1)},
		enginetest.Answer("two"),
		enginetest.Answer("three"),
	)
	e, err := New(Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	require.NoError(t, err)
	def, err := NewDefinition(DefinitionConfig{Name: "w", Model: "m", MaxTurns: 4})
	require.NoError(t, err)
	msg, err := message.User("go")
	require.NoError(t, err)
	run := func() *Run {
		r, err := e.Run(context.Background(), def, Input{Message: msg})
		require.NoError(t, err)
		_, err = r.Wait(context.Background())
		require.NoError(t, err)
		return r
	}
	require.Equal(t, minHistoryCapacity, e.historyCapacity(), "no run yet")
	first := run()
	require.Equal(t, 2, cap(first.st.history))
	require.Equal(t, 2, e.historyCapacity(), "a text run held two messages")
	tools := run()
	require.Len(t, tools.st.history, 4, "the input, the call, its result and the answer")
	require.Equal(t, 4, e.historyCapacity())
	after := run()
	require.Equal(t, 4, cap(after.st.history), "room for a tool round, as the last run had one")
	require.Len(t, after.st.history, 2)
	require.Equal(t, 2, e.historyCapacity())
}
