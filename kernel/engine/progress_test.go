package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// A required observer that refuses a call's progress event fails the run
// even when the call itself then fails, and the tool sees a typed,
// secret-free error (K16, K25).
func TestK16_ProgressObserverFailureFailsTheRunWhateverTheCall(t *testing.T) {
	const secret = "sk-observer-secret-42"
	var reportErr error
	work := newTool(t, "work", tool.ReadOnly, func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		p, err := tool.NewProgress(call.ID(), "halfway")
		require.NoError(t, err)
		reportErr = r.Report(ctx, p)
		return tool.Result{}, tool.Fail(call.ID(), problem.Must("broken", "the work failed"))
	})
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{work}, script: [][]model.Item{callOp("call-1", "work")}})
	f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "tool.progress" {
			return errors.New("disk full: " + secret)
		}
		return nil
	}
	r, _, err := f.run(t, 4)
	requireFailure(t, err, engine.CodeObserverFailed)
	require.Error(t, reportErr)
	require.NotContains(t, reportErr.Error(), secret)
	var oe *eventlog.ObserverError
	require.ErrorAs(t, reportErr, &oe, "the observer failure stays inspectable")
	requireWellFormed(t, events(t, r))
	require.NoError(t, f.eng.Close(context.Background()))
}

// A tool that keeps reporting from its own goroutine after it returned,
// through a dispatcher that hands it the engine's reporter directly, never
// gets a tool.progress in after the call's terminal (K9, K15).
func TestK9_NoProgressAfterTheCallEnds(t *testing.T) {
	done := make(chan struct{})
	chatty := newTool(t, "chatty", tool.ReadOnly, func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		go func() {
			defer close(done)
			p, _ := tool.NewProgress(call.ID(), "still here")
			for i := 0; i < 500 && r.Report(ctx, p) == nil; i++ {
			}
		}()
		return tool.NewResult(call.ID(), "returned")
	})
	p, err := plan.New("plan-raw", &rawDispatcher{tools: []enginetest.Tool{chatty}})
	require.NoError(t, err)
	f := newFixture(t, fixtureConfig{script: [][]model.Item{callOp("call-1", "chatty"), enginetest.Answer("ok")},
		mutate: func(c *engine.Config) { c.Plans = mustValue(plan.NewMemory(p)) }})
	r, _, err := f.run(t, 4)
	require.NoError(t, err)
	<-done
	evs := events(t, r)
	requireWellFormed(t, evs)
	ended := false
	for _, e := range evs {
		if e.Kind() == "tool.completed" {
			ended = true
		}
		require.False(t, ended && e.Kind() == "tool.progress", "progress after the call's terminal at seq %d", e.Seq())
	}
	require.NoError(t, f.eng.Close(context.Background()))
}
