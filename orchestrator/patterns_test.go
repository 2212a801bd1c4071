package orchestrator_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// textRun is the kernel kinds of one text-only run.
var textRun = []string{
	event.KindRunStarted, event.KindTurnStarted, event.KindModelStarted, event.KindModelTextDelta,
	event.KindModelCompleted, event.KindTurnCompleted, event.KindRunCompleted,
}

func TestO4_RelayRunsEachWorkerOnce(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A draft.")}, script{enginetest.Answer("Polished.")})
	p, res, err := h.run(t)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	require.Equal(t, 1, res.Rounds)
	require.Equal(t, 2, res.Runs)
	require.Equal(t, "Polished.", res.Final.Text())
	require.Equal(t, int64(30), res.Usage.Total())

	evs := timeline(t, p)
	want := []string{orchestrator.KindStarted}
	want = append(want, textRun...)
	want = append(want, orchestrator.KindHandoff)
	want = append(want, textRun...)
	want = append(want, orchestrator.KindCompleted)
	require.Equal(t, want, kinds(evs))
	end := requireTimeline(t, evs)
	require.Equal(t, orchestrator.Ended{PairID: "pair-1", Reason: orchestrator.ReasonCompleted,
		Rounds: 1, Runs: 2, InputTokens: 20, OutputTokens: 10}, end)
	require.Equal(t, res.LastSeq, evs[len(evs)-1].Seq())

	hs := handoffs(evs)
	require.Len(t, hs, 1)
	require.Equal(t, "writer", hs[0].From)
	require.Equal(t, "reviewer", hs[0].To)
	require.Equal(t, uint64(7), hs[0].LastSeq)
	require.Equal(t, relayed(evs, event.KindRunStarted)[0].RunID(), hs[0].FromRunID)
}

func TestO4_ReviewLoopEndsApprovedAfterTwoRounds(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two.")},
		script{enginetest.Answer("Make it shorter."), enginetest.Answer("Good.\nAPPROVED")})
	p, res, err := h.run(t)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	require.Equal(t, 2, res.Rounds)
	require.Equal(t, 4, res.Runs)
	require.Equal(t, "Draft two.", res.Final.Text())
	require.Equal(t, "Good.\nAPPROVED", res.Review.Text())

	// The writer's second run starts from the reviewer's feedback only.
	reqs := h.first.Requests()
	require.Len(t, reqs, 2)
	msgs := slices.Collect(reqs[1].Messages())
	require.Len(t, msgs, 1)
	require.Equal(t, "Task:\n"+task+"\n\nReviewer feedback:\nMake it shorter.", msgs[0].Text())

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	require.Equal(t, orchestrator.KindCompleted, end.Kind())
	require.Equal(t, 2, end.Rounds)
	hs := handoffs(evs)
	require.Len(t, hs, 3)
	require.Equal(t, []int{1, 1, 2}, []int{hs[0].Round, hs[1].Round, hs[2].Round})
	require.Equal(t, []string{"writer", "reviewer", "writer"}, []string{hs[0].From, hs[1].From, hs[2].From})
}

func TestO5_MaxRounds(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two.")},
		script{enginetest.Answer("Shorter."), enginetest.Answer("Still too long.")})
	h.cfg.MaxRounds = 2
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrMaxRounds)
	var pe *orchestrator.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, orchestrator.ReasonMaxRounds, pe.Reason)
	require.Equal(t, orchestrator.ReasonMaxRounds, res.Reason)
	require.Equal(t, 2, res.Rounds)
	require.Equal(t, 4, res.Runs)
	require.Equal(t, "Draft two.", res.Final.Text())
	end := requireTimeline(t, timeline(t, p))
	require.Equal(t, orchestrator.KindFailed, end.Kind())
	require.Equal(t, orchestrator.ReasonMaxRounds, end.Reason)
}

func TestO5_BudgetTokensRefusesTheNextModelOperation(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, toolThenAnswer("never"), script{enginetest.Answer("never")}, enginetest.Echo())
	h.cfg.Budget.Tokens = 10 // the first operation uses 15
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
	var pe *orchestrator.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, orchestrator.LimitTokens, pe.Limit)
	require.Equal(t, orchestrator.LimitTokens, res.Limit)
	require.Equal(t, 1, h.first.Calls(), "the second model operation is refused")
	require.Zero(t, h.second.Calls())
	require.Equal(t, 1, res.Runs)

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	require.Equal(t, orchestrator.KindFailed, end.Kind())
	require.Equal(t, orchestrator.LimitTokens, end.Limit)
	failed := relayed(evs, event.KindRunFailed)
	require.Len(t, failed, 1)
	require.Equal(t, orchestrator.CodeBudgetExhausted, failed[0].Payload().(event.RunFailed).Problem.Code())
}

func TestO5_BudgetTokensStartsNoFurtherRun(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")}, script{enginetest.Answer("never")})
	h.cfg.Budget.Tokens = 15 // exactly what the first run uses
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
	require.Equal(t, orchestrator.LimitTokens, res.Limit)
	require.Equal(t, 1, res.Runs)
	require.Zero(t, h.second.Calls())
	evs := timeline(t, p)
	requireTimeline(t, evs)
	require.Len(t, relayed(evs, event.KindRunStarted), 1)
}

func TestO5_BudgetToolCalls(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		t.Run(d.String(), func(t *testing.T) { budgetToolCalls(t, d) })
	}
}

func budgetToolCalls(t *testing.T, d orchestrator.Delivery) {
	var echoes counter
	h := newHarness(t, orchestrator.Relay,
		script{
			{enginetest.Call("call-1", "echo", `{}`), enginetest.Done(1, 1)},
			{enginetest.Call("call-2", "echo", `{}`), enginetest.Done(1, 1)},
			enginetest.Answer("never"),
		},
		script{enginetest.Answer("never")}, countedEcho(&echoes))
	h.cfg.Budget.ToolCalls = 1
	h.cfg.Timeline.Delivery = d
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
	require.Equal(t, orchestrator.ReasonBudgetExhausted, res.Reason)
	require.Equal(t, orchestrator.LimitToolCalls, res.Limit)
	require.Equal(t, 1, echoes.get(), "the call over the budget never runs")
	require.Equal(t, int64(1), res.ToolCalls)
	require.Zero(t, h.second.Calls())

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	require.Equal(t, orchestrator.LimitToolCalls, end.Limit)
	require.Len(t, relayed(evs, event.KindToolStarted), 1)
	require.Len(t, relayed(evs, event.KindRunCancelled), 1)
}

// blockingProvider streams nothing until its context ends.
type blockingProvider struct{ started chan struct{} }

func (p *blockingProvider) Stream(ctx context.Context, _ model.Request) (model.Stream, error) {
	if p.started != nil {
		close(p.started)
		p.started = nil
	}
	return blockingStream{ctx}, nil
}

type blockingStream struct{ ctx context.Context }

func (s blockingStream) Recv() (model.Item, error) {
	<-s.ctx.Done()
	return model.Item{}, s.ctx.Err()
}

func (blockingStream) Close() error { return nil }

func TestO5_BudgetWallTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, nil, script{enginetest.Answer("never")})
		h.cfg.First.Engine.Provider = &blockingProvider{}
		h.cfg.Budget.WallTime = time.Minute
		start := time.Now()
		p, res, err := h.run(t)
		require.Equal(t, time.Minute, time.Since(start))
		require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
		require.Equal(t, orchestrator.LimitWallTime, res.Limit)
		require.Zero(t, h.second.Calls())
		evs := timeline(t, p)
		end := requireTimeline(t, evs)
		require.Equal(t, orchestrator.LimitWallTime, end.Limit)
		require.Len(t, relayed(evs, event.KindRunCancelled), 1)
	})
}

func TestO5_LoopDetectedOnARepeatedHandoff(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Same draft."), enginetest.Answer("Same draft.")},
		script{enginetest.Answer("Change it."), enginetest.Answer("never")})
	h.cfg.MaxRounds = 5
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrLoopDetected)
	require.Equal(t, orchestrator.ReasonLoopDetected, res.Reason)
	require.Equal(t, 3, res.Runs, "the reviewer does not run on a repeated draft")
	require.Equal(t, 1, h.second.Calls())

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	require.Equal(t, orchestrator.ReasonLoopDetected, end.Reason)
	hs := handoffs(evs)
	require.Len(t, hs, 3)
	require.Equal(t, hs[0].SHA256, hs[2].SHA256)
	require.NotEqual(t, hs[0].SHA256, hs[1].SHA256)
}

func TestO5_WorkerFailed(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")},
		script{{enginetest.Fail("overloaded", "the model is overloaded")}})
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrWorkerFailed)
	var pe *orchestrator.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "reviewer", pe.Worker)
	var f *engine.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "overloaded", f.Problem.Code())
	require.Equal(t, orchestrator.ReasonWorkerFailed, res.Reason)

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	require.Equal(t, "reviewer", end.Worker)
	require.Equal(t, pe.RunID, end.RunID)
	require.Equal(t, "overloaded", end.Problem.Code())
	require.NotContains(t, pe.Error(), "overloaded", "errors never quote the cause")
}

func TestO5_HandoffOverTheBound(t *testing.T) {
	long := "A draft that is much longer than the tiny handoff bound of this test."
	t.Run("reject", func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, script{enginetest.Answer(long)}, script{enginetest.Answer("never")})
		pol, err := handoff.NewPolicy(handoff.Config{MaxBytes: 100})
		require.NoError(t, err)
		h.cfg.Policy = pol
		p, res, err := h.run(t)
		require.ErrorIs(t, err, orchestrator.ErrHandoffRejected)
		require.ErrorIs(t, err, bound.ErrExceeded)
		require.Equal(t, orchestrator.ReasonHandoffRejected, res.Reason)
		require.Zero(t, h.second.Calls())
		require.Empty(t, handoffs(timeline(t, p)))
	})
	t.Run("cut", func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, script{enginetest.Answer(long)}, script{enginetest.Answer("Done.")})
		pol, err := handoff.NewPolicy(handoff.Config{MaxBytes: 120, Over: handoff.Cut})
		require.NoError(t, err)
		h.cfg.Policy = pol
		p, _, err := h.run(t)
		require.NoError(t, err)
		got := slices.Collect(h.second.Requests()[0].Messages())[0].Text()
		require.LessOrEqual(t, len(got), 120)
		require.Contains(t, got, handoff.CutMarker)
		hs := handoffs(timeline(t, p))
		require.Len(t, hs, 1)
		require.True(t, hs[0].Cut)
		require.Equal(t, len(got), hs[0].Bytes)
		require.Equal(t, len(long), hs[0].AnswerBytes)
	})
}
