package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// The engine keeps its first active run apart from the others; with
// several runs active at once, ending one and starting another, Shutdown
// must still cancel every active run and wait for all of them (K27).
func TestK27_ShutdownCancelsEveryOneOfManyActiveRuns(t *testing.T) {
	leakCheck(t)
	entered := make(chan struct{}, 8)
	wait := newTool(t, "wait", tool.ReadOnly, func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return tool.Result{}, tool.Canceled(call.ID(), ctx.Err())
	})
	script := make([][]model.Item, 4)
	for i := range script {
		script[i] = callOp("call-1", "wait")
	}
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{wait}, script: script})
	start := func() *engine.Run {
		r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
		require.NoError(t, err)
		<-entered
		return r
	}
	runs := []*engine.Run{start(), start(), start()}
	// End the first run: the next one takes its place.
	runs[0].Cancel()
	_, err := runs[0].Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrCancelled)
	runs = append(runs[1:], start())

	// Bounded, so that a run Shutdown forgot fails the test instead of
	// hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.eng.Shutdown(ctx))
	for i, r := range runs {
		select {
		case <-r.Done():
		default:
			t.Fatalf("Shutdown returned before run %d ended", i)
		}
		res, err := r.Wait(context.Background())
		require.ErrorIs(t, err, engine.ErrCancelled)
		require.Equal(t, engine.Cancelled, res.Status)
		requireWellFormed(t, events(t, r))
	}
	require.Equal(t, 0, f.plans.Outstanding("plan-1"))
	require.NoError(t, f.eng.Close(context.Background()), "nothing left to wait for")
}

// A tool operation whose tool.started a required observer refused stays
// open until finalization, which ends it with tool.failed naming the call;
// for a mutating tool the outcome is uncertain (the call may have run), and
// the run is then never exported (K15, K16, K29).
func TestK15_FinalizationEndsAnOpenToolOperationWithItsCall(t *testing.T) {
	errStore := errors.New("store unavailable")
	for _, tc := range []struct {
		effect  tool.Effect
		outcome string
	}{{tool.ReadOnly, "definitive"}, {tool.Mutating, "uncertain"}} {
		t.Run(tc.outcome, func(t *testing.T) {
			ran := false
			write := newTool(t, "write", tc.effect, func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
				ran = true
				return tool.NewResult(call.ID(), "done")
			})
			f := newFixture(t, fixtureConfig{tools: []tool.Tool{write},
				script: [][]model.Item{callOp("call-7", "write"), enginetest.Answer("never")}})
			f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
				if e.Kind() == "tool.started" {
					return errStore
				}
				return nil
			}
			r, res, err := f.run(t, 4)
			require.ErrorIs(t, err, errStore)
			require.Equal(t, engine.Failed, res.Status)
			require.False(t, ran, "no call after its start was refused")
			evs := events(t, r)
			require.Equal(t, failedCallKinds, kinds(evs))
			requireWellFormed(t, evs)
			tf := payload[event.ToolFailed](t, evs, "tool.failed")
			require.Equal(t, "call-7", string(tf.CallID))
			require.Equal(t, "write", tf.Name)
			require.Equal(t, tc.outcome, tf.Outcome)
			_, err = r.Snapshot()
			if tc.effect == tool.Mutating {
				require.ErrorIs(t, err, engine.ErrSnapshotRefused)
			}
			require.NoError(t, f.eng.Close(context.Background()))
		})
	}
}
