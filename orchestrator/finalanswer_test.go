package orchestrator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// finalAnswers returns the pair.final_answer payloads.
func finalAnswers(evs []eventlog.Event) []orchestrator.FinalAnswer {
	var out []orchestrator.FinalAnswer
	for _, e := range evs {
		if f, ok := e.Payload().(orchestrator.FinalAnswer); ok {
			out = append(out, f)
		}
	}
	return out
}

// userText is the text of the last message of a recorded request.
func userText(req model.Request) string {
	var last string
	for m := range req.Messages() {
		last = m.Text()
	}
	return last
}

func TestO5_FinalAnswerAtMaxRoundsHasNoTools(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		t.Run(d.String(), func(t *testing.T) {
			var echoes counter
			h := newHarness(t, orchestrator.ReviewLoop,
				script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two."), enginetest.Answer("Final.")},
				script{enginetest.Answer("Shorter."), enginetest.Answer("Still too long.")}, countedEcho(&echoes))
			h.cfg.MaxRounds = 2
			h.cfg.OnLimit = orchestrator.AnswerAtLimit
			h.cfg.Timeline.Delivery = d
			p, res, err := h.run(t)
			require.ErrorIs(t, err, orchestrator.ErrMaxRounds, "the pair still ends with the limit's reason")
			require.Equal(t, orchestrator.ReasonMaxRounds, res.Reason)
			require.Equal(t, "Final.", res.Final.Text())
			require.Equal(t, "writer", res.FinalAnswer)
			require.Equal(t, 5, res.Runs)

			reqs := h.first.Requests()
			require.Len(t, reqs, 3)
			require.Equal(t, 1, reqs[0].NumTools(), "the pattern's runs are offered the plan's tool")
			require.Zero(t, reqs[2].NumTools(), "the final answer is offered no tool")
			prompt := userText(reqs[2])
			require.Contains(t, prompt, "Still too long.", "it sees the last feedback it was given")
			require.Contains(t, prompt, "Draft two.", "and its latest draft")
			require.Contains(t, prompt, "max_rounds")

			evs := timeline(t, p)
			end := requireTimeline(t, evs)
			require.Equal(t, orchestrator.ReasonMaxRounds, end.Reason)
			require.Equal(t, "writer", end.FinalAnswer)
			fa := finalAnswers(evs)
			require.Equal(t, []orchestrator.FinalAnswer{{Worker: "writer", Reason: orchestrator.ReasonMaxRounds}}, fa)
			require.Len(t, relayed(evs, event.KindRunStarted), 5)
			require.Zero(t, echoes.get())
		})
	}
}

// overBudget is a relay whose first worker spends 90 of 100 tokens: with
// a reserve of 0.2 the pattern may spend 80, so the second worker's run is
// refused and the second worker, which holds the draft, answers with the
// 10 tokens left.
func overBudget(t *testing.T, final []model.Item, echoes *counter) *harness {
	h := newHarness(t, orchestrator.Relay,
		script{
			{enginetest.Call("call-1", "echo", `{}`), enginetest.Done(30, 20)},
			{enginetest.Text("The draft."), enginetest.Done(20, 20)},
		},
		script{final}, countedEcho(echoes))
	h.cfg.Budget.Tokens = 100
	h.cfg.OnLimit = orchestrator.AnswerAtLimit
	h.cfg.FinalAnswerReserve = 0.2
	return h
}

func TestO5_FinalAnswerRespectsItsReserve(t *testing.T) {
	t.Run("within", func(t *testing.T) {
		var echoes counter
		h := overBudget(t, []model.Item{enginetest.Text("Best answer."), enginetest.Done(6, 4)}, &echoes)
		p, res, err := h.run(t)
		require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
		require.Equal(t, orchestrator.LimitTokens, res.Limit)
		require.Equal(t, "Best answer.", res.Final.Text())
		require.Equal(t, "reviewer", res.FinalAnswer)
		require.Equal(t, int64(100), res.Usage.Total())
		require.Equal(t, 1, echoes.get())
		require.Contains(t, userText(h.second.Requests()[0]), "The draft.")

		evs := timeline(t, p)
		end := requireTimeline(t, evs)
		require.Equal(t, orchestrator.LimitTokens, end.Limit)
		require.Equal(t, "reviewer", end.FinalAnswer)
		require.Equal(t, []orchestrator.FinalAnswer{{Worker: "reviewer", Reason: orchestrator.ReasonBudgetExhausted,
			Limit: orchestrator.LimitTokens, Tokens: 10}}, finalAnswers(evs))
	})
	t.Run("over", func(t *testing.T) {
		var echoes counter
		h := overBudget(t, []model.Item{enginetest.Text("Too long."), enginetest.Done(6, 5)}, &echoes)
		p, res, err := h.run(t)
		require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
		require.Empty(t, res.FinalAnswer, "an answer over the reserve is refused")
		require.Empty(t, res.Final.Text())
		evs := timeline(t, p)
		end := requireTimeline(t, evs)
		require.Empty(t, end.FinalAnswer)
		failed := relayed(evs, event.KindRunFailed)
		require.Len(t, failed, 1)
		require.Equal(t, orchestrator.CodeFinalAnswerOverReserve, failed[0].Payload().(event.RunFailed).Problem.Code())
	})
	t.Run("tool call", func(t *testing.T) {
		var echoes counter
		h := overBudget(t, []model.Item{enginetest.Call("call-9", "echo", `{}`), enginetest.Done(1, 1)}, &echoes)
		p, res, err := h.run(t)
		require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
		require.Empty(t, res.FinalAnswer)
		require.Equal(t, 1, echoes.get(), "the final answer never calls a tool")
		evs := timeline(t, p)
		requireTimeline(t, evs)
		require.Len(t, relayed(evs, event.KindToolStarted), 1, "only the first worker's call")
		failed := relayed(evs, event.KindRunFailed)
		require.Len(t, failed, 1)
		require.Equal(t, orchestrator.CodeFinalAnswerToolCall, failed[0].Payload().(event.RunFailed).Problem.Code())
	})
}

func TestO5_FinalAnswerKeepsItsWallTimeReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, nil, script{enginetest.Answer("never")})
		started := make(chan time.Time, 2)
		h.cfg.First.Engine.Provider = &hookProvider{inner: &blockingProvider{}, hook: func(context.Context, int) error {
			started <- time.Now()
			return nil
		}}
		h.cfg.Budget.WallTime = time.Minute
		h.cfg.OnLimit = orchestrator.AnswerAtLimit
		h.cfg.FinalAnswerReserve = 0.25
		start := time.Now()
		p, res, err := h.run(t)
		require.Equal(t, time.Minute, time.Since(start), "the final answer ends with the whole budget")
		require.Equal(t, 45*time.Second, (<-started).Sub(start)+(<-started).Sub(start), "the pattern stops at 45s")
		require.ErrorIs(t, err, orchestrator.ErrBudgetExhausted)
		require.Equal(t, orchestrator.LimitWallTime, res.Limit)
		require.Empty(t, res.FinalAnswer)
		evs := timeline(t, p)
		requireTimeline(t, evs)
		require.Len(t, finalAnswers(evs), 1)
		require.Len(t, relayed(evs, event.KindRunStarted), 2)
	})
}

func TestO5_NoFinalAnswerOnCancellation(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop, nil, script{enginetest.Answer("never")})
	h.cfg.MaxRounds = 1
	h.cfg.OnLimit = orchestrator.AnswerAtLimit
	started := make(chan struct{})
	var once sync.Once
	h.cfg.First.Engine.Provider = &hookProvider{inner: &blockingProvider{}, hook: func(context.Context, int) error {
		once.Do(func() { close(started) })
		return nil
	}}
	p, err := orchestrator.Start(context.Background(), h.cfg)
	require.NoError(t, err)
	<-started
	p.Cancel()
	res, err := p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrCancelled)
	require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
	require.Equal(t, 1, res.Runs)
	evs := timeline(t, p)
	requireTimeline(t, evs)
	require.Empty(t, finalAnswers(evs))
}

func TestO5_CancelStopsARunningFinalAnswer(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop, script{enginetest.Answer("Draft.")}, script{enginetest.Answer("No.")})
	h.cfg.MaxRounds = 1
	h.cfg.OnLimit = orchestrator.AnswerAtLimit
	// The writer's second operation, its final answer, blocks.
	started := make(chan struct{})
	h.cfg.First.Engine.Provider = &hookProvider{
		inner: &firstThenBlock{first: enginetest.NewProvider(enginetest.Answer("Draft."))},
		hook: func(_ context.Context, n int) error {
			if n == 2 {
				close(started)
			}
			return nil
		}}
	p, err := orchestrator.Start(context.Background(), h.cfg)
	require.NoError(t, err)
	select {
	case <-started:
	case <-p.Done():
		t.Fatal("the pair ended without a final answer")
	}
	p.Cancel()
	res, err := p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrMaxRounds, "a cancel after the limit keeps the limit's reason")
	require.Empty(t, res.FinalAnswer)
	require.Equal(t, "Draft.", res.Final.Text())
	evs := timeline(t, p)
	requireTimeline(t, evs)
	require.Len(t, finalAnswers(evs), 1)
	require.Len(t, relayed(evs, event.KindRunCancelled), 1)
}

// firstThenBlock answers its first operation from first and blocks every
// later one until its context ends.
type firstThenBlock struct {
	first model.Provider
	mu    sync.Mutex
	n     int
}

func (p *firstThenBlock) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	if n == 1 {
		return p.first.Stream(ctx, req)
	}
	return blockingStream{ctx}, nil
}

func TestO5_NoFinalAnswerWhenAWorkerFails(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")},
		script{{enginetest.Fail("overloaded", "the model is overloaded")}, enginetest.Answer("never")})
	h.cfg.OnLimit = orchestrator.AnswerAtLimit
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrWorkerFailed)
	require.Empty(t, res.FinalAnswer)
	require.Equal(t, 1, h.second.Calls())
	evs := timeline(t, p)
	requireTimeline(t, evs)
	require.Empty(t, finalAnswers(evs))
}

func TestO5_FinalAnswerOptionIsValidated(t *testing.T) {
	for name, c := range map[string]func(*orchestrator.Config){
		"reserve without the option": func(c *orchestrator.Config) { c.FinalAnswerReserve = 0.1 },
		"reserve over half": func(c *orchestrator.Config) {
			c.OnLimit, c.FinalAnswerReserve = orchestrator.AnswerAtLimit, 0.6
		},
		"negative reserve": func(c *orchestrator.Config) {
			c.OnLimit, c.FinalAnswerReserve = orchestrator.AnswerAtLimit, -0.1
		},
		"unknown option": func(c *orchestrator.Config) { c.OnLimit = 9 },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, orchestrator.Relay, nil, nil)
			c(&h.cfg)
			_, err := orchestrator.Start(context.Background(), h.cfg)
			_, ok := err.(*bound.Error)
			require.True(t, ok, "%v", err)
		})
	}
}

func TestO7_FinalAnswerPayloadRoundTrips(t *testing.T) {
	for _, p := range []orchestrator.FinalAnswer{
		{Worker: "writer", Reason: orchestrator.ReasonMaxRounds},
		{Worker: "w", Reason: orchestrator.ReasonBudgetExhausted, Limit: orchestrator.LimitTokens, Tokens: 12},
	} {
		raw := p.AppendJSON(nil)
		got, err := orchestrator.DecodePayload(orchestrator.KindFinalAnswer, raw)
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	_, err := orchestrator.DecodePayload(orchestrator.KindFinalAnswer, []byte(`{"worker":"w","reason":"cancelled","tokens":0}`))
	require.Error(t, err)
	e := orchestrator.Ended{PairID: "p", Reason: orchestrator.ReasonMaxRounds, FinalAnswer: "writer"}
	got, err := orchestrator.DecodePayload(orchestrator.KindFailed, e.AppendJSON(nil))
	require.NoError(t, err)
	require.Equal(t, e, got)
	require.True(t, strings.HasSuffix(string(e.AppendJSON(nil)), `"final_answer":"writer"}`))
}

func TestO5_TeamPairsEachGiveTheirFinalAnswer(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Draft A."), enginetest.Answer("Final A."), enginetest.Answer("Draft B."), enginetest.Answer("Final B.")},
		script{enginetest.Answer("No."), enginetest.Answer("No.")})
	h.cfg.MaxRounds = 1
	h.cfg.OnLimit = orchestrator.AnswerAtLimit
	h.cfg.Budget.Tokens = 1000
	team, err := orchestrator.NewTeam(h.cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, team.Close(context.Background())) }()
	for i, want := range []string{"Final A.", "Final B."} {
		p, err := team.Run(context.Background(), "pair-"+string(rune('a'+i)), task)
		require.NoError(t, err)
		res, err := p.Wait(context.Background())
		require.ErrorIs(t, err, orchestrator.ErrMaxRounds)
		require.Equal(t, want, res.Final.Text())
		require.Equal(t, "writer", res.FinalAnswer)
		fa := finalAnswers(timeline(t, p))
		require.Len(t, fa, 1)
		require.Equal(t, int64(1000-30), fa[0].Tokens, "each pair meters its own budget")
	}
}
