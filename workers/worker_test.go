package workers_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/workers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func definition(t testing.TB, name, system string) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", System: system, MaxTurns: 2})
	require.NoError(t, err)
	return d
}

func user(t testing.TB, s string) message.Message {
	t.Helper()
	m, err := message.User(s)
	require.NoError(t, err)
	return m
}

func newWorker(t testing.TB, role string, plans plan.Source, p *enginetest.Provider) *workers.Worker {
	t.Helper()
	w, err := workers.New(workers.Config{Role: role, Definition: definition(t, role, "You are the "+role+"."),
		Engine: engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{Prefix: role + "/"}, Clock: &enginetest.Clock{}}})
	require.NoError(t, err)
	return w
}

func TestO1_AWorkerIsARoleAnEngineAndADefinition(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	p := enginetest.NewProvider(enginetest.Answer("Hi."), enginetest.Answer("Again."))
	p.Record = true
	w := newWorker(t, "writer", plans, p)
	require.Equal(t, "writer", w.Role())
	require.Equal(t, "writer", w.Definition().Name())
	require.NotNil(t, w.Engine())

	r, err := w.Run(context.Background(), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	res, err := r.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, "Hi.", res.Final.Text())
	require.Equal(t, id.Run("writer/run-1"), r.ID())

	r, err = w.Start(context.Background(), engine.Input{Message: user(t, "again"), Plan: "plan-1"})
	require.NoError(t, err)
	res, err = r.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, "Again.", res.Final.Text())

	// Each run of a worker starts from its input alone: the engine keeps
	// no history between runs.
	reqs := p.Requests()
	require.Len(t, reqs, 2)
	for i, want := range []string{"hello", "again"} {
		msgs := slices.Collect(reqs[i].Messages())
		require.Len(t, msgs, 1)
		require.Equal(t, want, msgs[0].Text())
		require.Equal(t, "You are the writer.", reqs[i].System())
	}
	require.NoError(t, w.Close(context.Background()))
	_, err = w.Run(context.Background(), engine.Input{Message: user(t, "late")})
	require.ErrorIs(t, err, engine.ErrClosed)
}

func TestO1_TwoWorkersOnOnePlanSourceHaveSeparateEngines(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	pa, pb := enginetest.NewProvider(enginetest.Answer("A.")), enginetest.NewProvider(enginetest.Answer("B."))
	pa.Record, pb.Record = true, true
	a, b := newWorker(t, "writer", plans, pa), newWorker(t, "reviewer", plans, pb)
	require.NotSame(t, a.Engine(), b.Engine())

	ra, err := a.Run(context.Background(), engine.Input{Message: user(t, "to a")})
	require.NoError(t, err)
	rb, err := b.Run(context.Background(), engine.Input{Message: user(t, "to b")})
	require.NoError(t, err)
	require.Equal(t, ra.Plan(), rb.Plan())
	require.Equal(t, 1, pa.Calls())
	require.Equal(t, 1, pb.Calls())
	msgs := slices.Collect(pb.Requests()[0].Messages())
	require.Len(t, msgs, 1, "the reviewer's engine never sees the writer's run")
	require.Equal(t, "to b", msgs[0].Text())

	// Closing one worker leaves the other serving.
	require.NoError(t, a.Shutdown(context.Background()))
	_, err = a.Run(context.Background(), engine.Input{Message: user(t, "x")})
	require.ErrorIs(t, err, engine.ErrClosed)
	require.NoError(t, b.Close(context.Background()))
}

func TestNewValidates(t *testing.T) {
	plans, err := enginetest.Plan("plan-1")
	require.NoError(t, err)
	good := workers.Config{Role: "writer", Definition: definition(t, "writer", ""),
		Engine: engine.Config{Provider: enginetest.NewProvider(), Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}}}
	for name, mutate := range map[string]func(*workers.Config){
		"no role":       func(c *workers.Config) { c.Role = "" },
		"bad role":      func(c *workers.Config) { c.Role = "Writer One" },
		"no definition": func(c *workers.Config) { c.Definition = engine.Definition{} },
		"no provider":   func(c *workers.Config) { c.Engine.Provider = nil },
		"no plans":      func(c *workers.Config) { c.Engine.Plans = nil },
	} {
		cfg := good
		mutate(&cfg)
		w, err := workers.New(cfg)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
		require.Nil(t, w)
	}
}
