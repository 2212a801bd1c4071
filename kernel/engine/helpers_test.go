package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// fixture is an engine with deterministic parts.
type fixture struct {
	eng      *engine.Engine
	provider *enginetest.Provider
	plans    *plan.Memory
	rec      *enginetest.Recorder
}

type fixtureConfig struct {
	tools  []tool.Tool
	script [][]model.Item
	mutate func(*engine.Config)
}

func newFixture(t testing.TB, fc fixtureConfig) *fixture {
	t.Helper()
	plans, err := enginetest.Plan("plan-1", fc.tools...)
	require.NoError(t, err)
	f := &fixture{provider: enginetest.NewProvider(fc.script...), plans: plans, rec: &enginetest.Recorder{}}
	cfg := engine.Config{
		Provider: f.provider,
		Plans:    plans,
		IDs:      &id.Counter{},
		Clock:    &enginetest.Clock{},
		Required: []eventlog.Observer{f.rec},
	}
	if fc.mutate != nil {
		fc.mutate(&cfg)
	}
	f.eng, err = engine.New(cfg)
	require.NoError(t, err)
	return f
}

func definition(t testing.TB, maxTurns int) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: "assistant", Model: "scripted-1", System: "Be brief.", MaxTurns: maxTurns})
	require.NoError(t, err)
	return d
}

func user(t testing.TB, s string) message.Message {
	t.Helper()
	m, err := message.User(s)
	require.NoError(t, err)
	return m
}

// run starts a run and waits for it.
func (f *fixture) run(t testing.TB, maxTurns int) (*engine.Run, engine.Result, error) {
	t.Helper()
	r, err := f.eng.Start(context.Background(), definition(t, maxTurns), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	res, err := r.Wait(context.Background())
	return r, res, err
}

// events reads every event of a finished run through a subscription.
func events(t testing.TB, r *engine.Run) []eventlog.Event {
	t.Helper()
	sub, err := r.Subscribe(context.Background(), 0)
	require.NoError(t, err)
	out, err := enginetest.ReadAll(context.Background(), sub)
	require.NoError(t, err)
	return out
}

func kinds(evs []eventlog.Event) []string { return enginetest.Kinds(evs) }

// requireWellFormed checks K15 on a finished run's events: sequences 1..n
// without gaps, and exactly one terminal for every started lifecycle.
func requireWellFormed(t testing.TB, evs []eventlog.Event) {
	t.Helper()
	open := map[string]int{}
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq(), "sequence gap at %d", i)
		key := lifecycleKey(t, e)
		if key == "" {
			continue
		}
		switch {
		case isStarted(e.Kind()):
			require.Zero(t, open[key], "started twice: %s", key)
			open[key] = 1
		case isTerminal(e.Kind()):
			require.Equal(t, 1, open[key], "terminal without start, or second terminal: %s (%s)", key, e.Kind())
			open[key] = 2
		}
	}
	for k, v := range open {
		require.Equal(t, 2, v, "lifecycle %s has no terminal", k)
	}
}

func isStarted(kind string) bool { return len(kind) > 8 && kind[len(kind)-8:] == ".started" }

func isTerminal(kind string) bool { return event.Terminal(kind) }

// lifecycleKey names the lifecycle an event belongs to ("" for deltas and
// progress).
func lifecycleKey(t testing.TB, e eventlog.Event) string {
	switch p := e.Payload().(type) {
	case event.RunStarted:
		return "run"
	case event.RunCompleted, event.RunFailed, event.RunCancelled:
		return "run"
	case event.TurnStarted:
		return "turn/" + string(p.TurnID)
	case event.TurnCompleted:
		return "turn/" + string(p.TurnID)
	case event.TurnFailed:
		return "turn/" + string(p.TurnID)
	case event.TurnCancelled:
		return "turn/" + string(p.TurnID)
	case event.ModelStarted:
		return "op/" + string(p.OperationID)
	case event.ModelCompleted:
		return "op/" + string(p.OperationID)
	case event.ModelFailed:
		return "op/" + string(p.OperationID)
	case event.ModelCancelled:
		return "op/" + string(p.OperationID)
	case event.ToolStarted:
		return "op/" + string(p.OperationID)
	case event.ToolCompleted:
		return "op/" + string(p.OperationID)
	case event.ToolFailed:
		return "op/" + string(p.OperationID)
	case event.ToolCancelled:
		return "op/" + string(p.OperationID)
	case event.InteractionStarted:
		return "ix/" + string(p.InteractionID)
	case event.InteractionAnswered:
		return "ix/" + string(p.InteractionID)
	case event.InteractionFailed:
		return "ix/" + string(p.InteractionID)
	case event.InteractionCancelled:
		return "ix/" + string(p.InteractionID)
	case event.ModelTextDelta, event.ToolProgress:
		return ""
	}
	t.Fatalf("unknown payload %T", e.Payload())
	return ""
}
