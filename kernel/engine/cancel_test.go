package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// cancelScript is a tool run: turn 1 streams a delta and calls echo, turn 2
// answers.
func cancelScript() [][]model.Item {
	return [][]model.Item{
		{enginetest.Text("Checking."), enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
		{enginetest.Text("Done."), enginetest.Done(20, 7)},
	}
}

// cancelExpectation says how a run of cancelScript ends when it is
// cancelled right after event k: the events after k (terminals included)
// and the completed turns.
type cancelExpectation struct {
	after []string
	turns int
}

// The uncancelled run is:
//
//	1 run.started  2 turn.started  3 model.started  4 model.text_delta
//	5 model.completed  6 tool.started  7 tool.completed  8 turn.completed
//	9 turn.started  10 model.started  11 model.text_delta
//	12 model.completed  13 turn.completed  14 run.completed
//
// The engine checks cancellation before each turn, before each model
// operation, between stream items and before each tool call; the canonical
// dispatcher refuses to start a tool under a cancelled context. So:
//   - k=1, 8: the next turn is not started;
//   - k=2, 9: the model operation is not started; the turn is cancelled;
//   - k=3, 4, 10, 11: the stream is not read further; model operation and
//     turn are cancelled;
//   - k=5: the model answered with a call, which is not started;
//   - k=6: the dispatcher does not run the tool: tool.cancelled;
//   - k=7: the tool result is committed, so its turn completes and the run
//     ends cancelled before the next turn;
//   - k=12, 13: the model's final answer is committed and no boundary is
//     left before the run's end, so the run completes.
var cancelAt = map[int]cancelExpectation{
	1:  {[]string{"run.cancelled"}, 0},
	2:  {[]string{"turn.cancelled", "run.cancelled"}, 0},
	3:  {[]string{"model.cancelled", "turn.cancelled", "run.cancelled"}, 0},
	4:  {[]string{"model.cancelled", "turn.cancelled", "run.cancelled"}, 0},
	5:  {[]string{"turn.cancelled", "run.cancelled"}, 0},
	6:  {[]string{"tool.cancelled", "turn.cancelled", "run.cancelled"}, 0},
	7:  {[]string{"turn.completed", "run.cancelled"}, 1},
	8:  {[]string{"run.cancelled"}, 1},
	9:  {[]string{"turn.cancelled", "run.cancelled"}, 1},
	10: {[]string{"model.cancelled", "turn.cancelled", "run.cancelled"}, 1},
	11: {[]string{"model.cancelled", "turn.cancelled", "run.cancelled"}, 1},
	12: {[]string{"turn.completed", "run.completed"}, 2},
	13: {[]string{"run.completed"}, 2},
}

func TestK24_CancelAtEveryEventBoundary(t *testing.T) {
	base := newFixture(t, fixtureConfig{tools: []tool.Tool{enginetest.Echo()}, script: cancelScript()})
	baseRun, _, err := base.run(t, 4)
	require.NoError(t, err)
	all := events(t, baseRun)
	n := len(all)
	require.Equal(t, 14, n)
	require.Len(t, cancelAt, n-1, "an expectation for every k in 1..N-1")

	for _, via := range []string{"Run.Cancel", "Start ctx"} {
		for k := 1; k < n; k++ {
			want := cancelAt[k]
			t.Run(via+"/"+all[k-1].Kind()+"/"+itoa(k), func(t *testing.T) {
				f := newFixture(t, fixtureConfig{tools: []tool.Tool{enginetest.Echo()}, script: cancelScript()})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				late := newLateRun()
				f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
					if e.Seq() == uint64(k) {
						if via == "Run.Cancel" {
							late.get().Cancel()
						} else {
							cancel()
						}
					}
					return nil
				}
				r := f.start(t, ctx, 4)
				late.set(r)
				res, err := waitRun(r)

				evs := events(t, r)
				require.Equal(t, encodeAll(all[:k]), encodeAll(evs[:k]), "every event up to the cancellation is kept as it was")
				require.Equal(t, want.after, kinds(evs[k:]))
				requireWellFormed(t, evs)
				require.Equal(t, kinds(evs), f.rec.Kinds(), "the observer saw every event, none after the run terminal")
				require.Equal(t, want.turns, res.Turns)
				require.Equal(t, uint64(len(evs)), res.LastSeq)
				if want.after[len(want.after)-1] == "run.completed" {
					require.NoError(t, err)
					require.Equal(t, engine.Completed, res.Status)
					require.Equal(t, "Done.", res.Final.Text())
					return
				}
				require.ErrorIs(t, err, engine.ErrCancelled)
				require.ErrorIs(t, err, context.Canceled)
				require.Equal(t, engine.Cancelled, res.Status)
				require.True(t, res.Final.IsZero())
				requireOneRunTerminal(t, evs, "run.cancelled")
				require.Equal(t, event.RunCancelled{RunID: "run-1", Turns: want.turns,
					InputTokens: res.Usage.Input(), OutputTokens: res.Usage.Output()}, evs[len(evs)-1].Payload())
				if k == 6 {
					require.Equal(t, "definitive", payloadOf[event.ToolCancelled](t, evs[6]).Outcome,
						"a read-only tool that did not start has a definitive outcome")
				}
			})
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestK24_CancelBeforeStart: a ctx cancelled before Start makes the plan
// source refuse the lease, so nothing exists: no run, no ID, no event.
func TestK24_CancelBeforeStart(t *testing.T) {
	ids := &countingIDs{}
	f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("never")},
		mutate: func(c *engine.Config) { c.IDs = ids }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := f.eng.Start(ctx, definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, r)
	require.Empty(t, f.rec.Events())
	require.Zero(t, ids.calls.Load())
	require.Zero(t, f.provider.Calls())
	require.Zero(t, f.plans.Outstanding("plan-1"))
}

// cancellingTool cancels its run and then returns a valid result.
func cancellingTool(t *testing.T, late *lateRun) enginetest.Tool {
	return readOnlyTool(t, "stop", func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		late.get().Cancel()
		<-ctx.Done() // the cancellation has reached the tool
		return tool.NewResult(call.ID(), "stopped cleanly")
	})
}

func TestK8_CommittedResultWinsRacingCancellation(t *testing.T) {
	t.Run("last call of the turn", func(t *testing.T) {
		late := newLateRun()
		f := newFixture(t, fixtureConfig{
			tools:  []tool.Tool{cancellingTool(t, late)},
			script: oneCallScript("stop"),
		})
		r := f.start(t, context.Background(), 4)
		late.set(r)
		res, err := waitRun(r)
		require.ErrorIs(t, err, engine.ErrCancelled)
		evs := events(t, r)
		// The result is kept and the turn it completes ends completed; the
		// run ends cancelled at the next turn boundary.
		require.Equal(t, []string{
			"run.started", "turn.started", "model.started", "model.completed",
			"tool.started", "tool.completed", "turn.completed", "run.cancelled",
		}, kinds(evs))
		requireWellFormed(t, evs)
		require.Equal(t, event.ToolCompleted{OperationID: "op-2", CallID: "call-1", Name: "stop", Content: "stopped cleanly"}, evs[5].Payload())
		require.Equal(t, 1, res.Turns)
		require.Equal(t, 1, f.provider.Calls(), "no model operation after the cancellation")
		h := runHistory(t, r)
		require.Len(t, h, 3, "the kept result is in the history")
	})
	t.Run("more calls in the turn", func(t *testing.T) {
		late := newLateRun()
		echoed := false
		echo := readOnlyTool(t, "echo", func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
			echoed = true
			return tool.NewResult(call.ID(), "echo")
		})
		f := newFixture(t, fixtureConfig{
			tools: []tool.Tool{cancellingTool(t, late), echo},
			script: [][]model.Item{
				{enginetest.Call("call-1", "stop", `{}`), enginetest.Call("call-2", "echo", `{}`), enginetest.Done(1, 1)},
				enginetest.Answer("never"),
			},
		})
		r := f.start(t, context.Background(), 4)
		late.set(r)
		res, err := waitRun(r)
		require.ErrorIs(t, err, engine.ErrCancelled)
		evs := events(t, r)
		// The committed result stays; the next call is not started.
		require.Equal(t, []string{
			"run.started", "turn.started", "model.started", "model.completed",
			"tool.started", "tool.completed", "turn.cancelled", "run.cancelled",
		}, kinds(evs))
		requireWellFormed(t, evs)
		require.Equal(t, "stopped cleanly", payloadOf[event.ToolCompleted](t, evs[5]).Content)
		require.False(t, echoed)
		require.Zero(t, res.Turns)
	})
}

func TestK8_CancellationErrorWhileRunActiveIsFailure(t *testing.T) {
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		t.Run(ctxErr.Error(), func(t *testing.T) {
			liar := readOnlyTool(t, "liar", func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
				return tool.Result{}, tool.Canceled(call.ID(), ctxErr)
			})
			f := newFixture(t, fixtureConfig{
				tools:  []tool.Tool{liar},
				script: oneCallScript("liar"),
			})
			r, res, err := f.run(t, 4)
			evs := events(t, r)
			require.Equal(t, failedCallKinds, kinds(evs))
			requireWellFormed(t, evs)
			require.Equal(t, engine.Failed, res.Status)
			failure := requireFailure(t, err, payloadOf[event.ToolFailed](t, evs[5]).Problem.Code())
			require.False(t, errors.Is(err, engine.ErrCancelled), "not a cancellation")
			require.ErrorIs(t, failure, ctxErr, "the cause keeps its errors.Is meaning")
			var ee *tool.ExecutionError
			require.ErrorAs(t, err, &ee)
		})
	}
}

// A provider that reports the cause its caller gave for the cancellation
// (context.Cause) ends the run cancelled, not failed: whether the run was
// cancelled is decided from its own context (K24).
func TestK24_ProviderReturningTheCauseEndsTheRunCancelled(t *testing.T) {
	hostGone := errors.New("host going away")
	streaming := make(chan struct{})
	f := newFixture(t, fixtureConfig{mutate: func(c *engine.Config) {
		c.Provider = providerFunc(func(ctx context.Context, _ model.Request) (model.Stream, error) {
			close(streaming)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		})
	}})
	ctx, cancel := context.WithCancelCause(context.Background())
	r := f.start(t, ctx, 2)
	<-streaming
	cancel(hostGone)
	res, err := waitRun(r)
	require.ErrorIs(t, err, engine.ErrCancelled)
	require.Equal(t, engine.Cancelled, res.Status)
	require.Equal(t, event.KindRunCancelled, f.rec.Kinds()[len(f.rec.Kinds())-1])
}
