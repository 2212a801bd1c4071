package engine_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// toolRunKinds are the events of a run that calls one tool in turn 1 and
// answers with one text delta in turn 2.
var toolRunKinds = []string{
	"run.started", "turn.started", "model.started", "model.completed",
	"tool.started", "tool.completed", "turn.completed",
	"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed",
	"run.completed",
}

func TestK27_CloseWaitsForActiveRuns(t *testing.T) {
	leakCheck(t)
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		f := newFixture(t, fixtureConfig{
			tools:  []tool.Tool{g.tool(t, "block")},
			script: [][]model.Item{callOp("call-1", "block"), enginetest.Answer("done")},
		})
		r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
		require.NoError(t, err)
		<-g.entered

		closed := make(chan error, 1)
		go func() { closed <- f.eng.Close(context.Background()) }()
		synctest.Wait() // Close is now waiting, or has returned
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a run was blocked in a tool", err)
		default:
		}
		_, err = f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "again")})
		require.ErrorIs(t, err, engine.ErrClosed)
		_, err = f.eng.Run(context.Background(), definition(t, 4), engine.Input{Message: user(t, "again")})
		require.ErrorIs(t, err, engine.ErrClosed)

		close(g.release)
		require.NoError(t, <-closed)
		select {
		case <-r.Done():
		default:
			t.Fatal("Close returned before the run ended")
		}
		res, err := r.Wait(context.Background())
		require.NoError(t, err, "Close lets the run finish")
		require.Equal(t, engine.Completed, res.Status)
		evs := events(t, r)
		require.Equal(t, toolRunKinds, kinds(evs))
		requireWellFormed(t, evs)
		require.Equal(t, 0, f.plans.Outstanding("plan-1"))
		require.Equal(t, 2, f.provider.Calls(), "the refused starts reached nothing")
	})
}

func TestK27_ShutdownCancelsActiveRuns(t *testing.T) {
	leakCheck(t)
	entered := make(chan struct{})
	wait := newTool(t, "wait", tool.ReadOnly, func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		close(entered)
		<-ctx.Done()
		return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
	})
	f := newFixture(t, fixtureConfig{
		tools:  []tool.Tool{wait},
		script: [][]model.Item{callOp("call-1", "wait"), enginetest.Answer("never")},
	})
	r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	<-entered

	require.NoError(t, f.eng.Shutdown(context.Background()))
	select {
	case <-r.Done():
	default:
		t.Fatal("Shutdown returned before the run ended")
	}
	res, err := r.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrCancelled)
	require.Equal(t, engine.Cancelled, res.Status)
	evs := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "tool.cancelled", "turn.cancelled", "run.cancelled",
	}, kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, 1, f.provider.Calls())
	require.Equal(t, 0, f.plans.Outstanding("plan-1"))

	_, err = f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "again")})
	require.ErrorIs(t, err, engine.ErrClosed)
	require.NoError(t, f.eng.Shutdown(context.Background()), "a second Shutdown has nothing to wait for")
}

func TestK27_CloseHonoursItsContext(t *testing.T) {
	leakCheck(t)
	synctest.Test(t, func(t *testing.T) {
		g := newGate()
		f := newFixture(t, fixtureConfig{
			tools:  []tool.Tool{g.tool(t, "block")},
			script: [][]model.Item{callOp("call-1", "block"), enginetest.Answer("done")},
		})
		r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
		require.NoError(t, err)
		<-g.entered

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err = f.eng.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, time.Second, time.Since(start), "Close gave up exactly when its context ended")
		select {
		case <-r.Done():
			t.Fatal("Close ended the run; only Shutdown cancels")
		default:
		}
		_, err = f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "again")})
		require.ErrorIs(t, err, engine.ErrClosed, "the engine stays closed after Close gave up")

		close(g.release)
		res, err := r.Wait(context.Background())
		require.NoError(t, err)
		require.Equal(t, engine.Completed, res.Status)
		require.Equal(t, toolRunKinds, kinds(events(t, r)))
		require.NoError(t, f.eng.Close(context.Background()), "a later Close finds no active run")
	})
}

// Shutdown racing Start never meets a run that is half built (K27).
func TestK27_ShutdownRacingStart(t *testing.T) {
	for range 50 {
		f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("Hi")}})
		var wg sync.WaitGroup
		wg.Go(func() {
			r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
			if err != nil {
				require.ErrorIs(t, err, engine.ErrClosed)
				return
			}
			_, _ = waitRun(r)
		})
		require.NoError(t, f.eng.Shutdown(context.Background()))
		wg.Wait()
	}
}
