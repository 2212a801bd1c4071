package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// askRunKinds are the events of a run whose turn-1 tool asks one question
// that ends with terminal, and whose turn 2 answers.
func askRunKinds(terminal string) []string {
	return []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "interaction.started", terminal, "tool.completed", "turn.completed",
		"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed",
		"run.completed",
	}
}

// askFixture is a run whose turn 1 calls the asker tool.
func askFixture(t *testing.T, a *asker, broker interaction.Broker) *fixture {
	t.Helper()
	return newFixture(t, fixtureConfig{
		tools:  []tool.Tool{a.tool(t)},
		script: [][]model.Item{callOp("call-1", "ask"), enginetest.Answer("done")},
		mutate: func(c *engine.Config) {
			if broker != nil {
				c.Broker = broker
			}
		},
	})
}

// requireOneInteraction checks that the run's only interaction has exactly
// one terminal, inside the tool operation that asked.
func requireOneInteraction(t *testing.T, evs []eventlog.Event, terminal string) {
	t.Helper()
	requireWellFormed(t, evs)
	require.Equal(t, 1, countKind(evs, "interaction.started"))
	n := 0
	for _, e := range evs {
		if e.Kind() != "interaction.started" && countKind([]eventlog.Event{e}, "interaction.") == 1 {
			n++
			require.Equal(t, terminal, e.Kind())
		}
	}
	require.Equal(t, 1, n, "exactly one interaction terminal")
	started := payload[event.InteractionStarted](t, evs, "interaction.started")
	require.Equal(t, "Proceed?", started.Prompt)
	require.Equal(t, payload[event.ToolStarted](t, evs, "tool.started").TurnID, started.TurnID)
}

func TestK28_InteractionAnswered(t *testing.T) {
	a := &asker{}
	var asked interaction.Question
	f := askFixture(t, a, brokerFunc(func(_ context.Context, q interaction.Question) (interaction.Answer, error) {
		asked = q
		return interaction.NewAnswer(q.ID(), "yes"), nil
	}))
	r, res, err := f.run(t, 4)
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)

	answers, errs := a.results()
	require.Equal(t, []string{"yes"}, answers, "the tool got the answer")
	require.Equal(t, []error{nil}, errs)
	require.Equal(t, "Proceed?", asked.Prompt())
	var choices []string
	for c := range asked.Choices() {
		choices = append(choices, c)
	}
	require.Equal(t, []string{"yes", "no"}, choices)

	evs := events(t, r)
	require.Equal(t, askRunKinds("interaction.answered"), kinds(evs))
	requireOneInteraction(t, evs, "interaction.answered")
	answered := payload[event.InteractionAnswered](t, evs, "interaction.answered")
	require.Equal(t, asked.ID(), answered.InteractionID)
	require.Equal(t, "yes", answered.Answer)
	require.Equal(t, "yes", payload[event.ToolCompleted](t, evs, "tool.completed").Content)
	require.NoError(t, f.eng.Close(context.Background()))
}

// requireIxFailed runs the asker against broker and checks that the
// question ended with one interaction.failed carrying code, which the tool
// also got as a *engine.Failure, and that the run went on.
func requireIxFailed(t *testing.T, broker interaction.Broker, code string) (*fixture, []eventlog.Event, error) {
	t.Helper()
	a := &asker{}
	f := askFixture(t, a, broker)
	r, res, err := f.run(t, 4)
	require.NoError(t, err, "a failed question is the tool's business; the run goes on")
	require.Equal(t, engine.Completed, res.Status)

	answers, errs := a.results()
	require.Equal(t, []string{""}, answers)
	require.Len(t, errs, 1)
	var fail *engine.Failure
	require.ErrorAs(t, errs[0], &fail)
	require.Equal(t, code, fail.Problem.Code())

	evs := events(t, r)
	require.Equal(t, askRunKinds("interaction.failed"), kinds(evs))
	requireOneInteraction(t, evs, "interaction.failed")
	require.Equal(t, code, payload[event.InteractionFailed](t, evs, "interaction.failed").Problem.Code())
	require.Equal(t, problemAskFailed.Code(), mustToolProblem(t, evs))
	require.NoError(t, f.eng.Close(context.Background()))
	return f, evs, errs[0]
}

func mustToolProblem(t *testing.T, evs []eventlog.Event) string {
	t.Helper()
	p := payload[event.ToolCompleted](t, evs, "tool.completed").Problem
	require.False(t, p.IsZero())
	return p.Code()
}

func TestK28_InteractionFailedByBrokerError(t *testing.T) {
	errDown := errors.New("broker down: token=secret")
	_, evs, err := requireIxFailed(t, brokerFunc(func(context.Context, interaction.Question) (interaction.Answer, error) {
		return interaction.Answer{}, errDown
	}), engine.CodeInteraction)
	require.ErrorIs(t, err, errDown, "the cause stays reachable")
	require.NotContains(t, err.Error(), "secret")
	failed := payload[event.InteractionFailed](t, evs, "interaction.failed")
	require.NotContains(t, failed.Problem.String(), "secret", "the event never quotes the broker's error")
}

func TestK28_InteractionFailedByValidation(t *testing.T) {
	t.Run("answer not among the choices", func(t *testing.T) {
		requireIxFailed(t, answering("maybe"), "invalid_answer")
	})
	t.Run("answer for another interaction", func(t *testing.T) {
		requireIxFailed(t, brokerFunc(func(context.Context, interaction.Question) (interaction.Answer, error) {
			return interaction.NewAnswer("ix-other", "yes"), nil
		}), "invalid_answer")
	})
	t.Run("empty answer", func(t *testing.T) {
		requireIxFailed(t, answering(""), "invalid_answer")
	})
}

func TestK28_InteractionFailedByPanic(t *testing.T) {
	_, _, err := requireIxFailed(t, brokerFunc(func(context.Context, interaction.Question) (interaction.Answer, error) {
		panic("broker exploded: token=secret")
	}), engine.CodePanic)
	require.NotContains(t, err.Error(), "secret", "the panic value is dropped")
}

func TestK28_InteractionFailedNoBroker(t *testing.T) {
	f, _, _ := requireIxFailed(t, nil, engine.CodeInteraction)
	require.Equal(t, 2, f.provider.Calls())
}

func TestK28_InteractionFailedObserverError(t *testing.T) {
	errObs := errors.New("observer refused")
	a := &asker{}
	var brokerCalls atomic.Int32
	f := askFixture(t, a, brokerFunc(func(_ context.Context, q interaction.Question) (interaction.Answer, error) {
		brokerCalls.Add(1)
		return interaction.NewAnswer(q.ID(), "yes"), nil
	}))
	f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "interaction.started" {
			return errObs
		}
		return nil
	}
	r, res, runErr := f.run(t, 4)
	require.Equal(t, engine.Failed, res.Status, "the run cannot go on past an event a required observer refused (K16)")
	var runFail *engine.Failure
	require.ErrorAs(t, runErr, &runFail)
	require.Equal(t, engine.CodeObserverFailed, runFail.Problem.Code())

	_, errs := a.results()
	require.Len(t, errs, 1)
	var fail *engine.Failure
	require.ErrorAs(t, errs[0], &fail)
	require.Equal(t, engine.CodeObserverFailed, fail.Problem.Code())
	var oe *eventlog.ObserverError
	require.ErrorAs(t, errs[0], &oe)
	require.Equal(t, uint64(6), oe.Seq)
	require.Zero(t, brokerCalls.Load(), "an unrecorded question is never put to the broker")

	evs := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "interaction.started", "interaction.failed", "tool.completed", "turn.failed",
		"run.failed",
	}, kinds(evs), "the call's own outcome stands; the turn and the run fail")
	require.Equal(t, "interaction.started", evs[oe.Seq-1].Kind(), "the sequence is kept")
	requireOneInteraction(t, evs, "interaction.failed")
	require.Equal(t, engine.CodeObserverFailed, payload[event.InteractionFailed](t, evs, "interaction.failed").Problem.Code())
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK28_InteractionCancelled(t *testing.T) {
	a := &asker{}
	asked := make(chan struct{})
	f := askFixture(t, a, brokerFunc(func(ctx context.Context, _ interaction.Question) (interaction.Answer, error) {
		close(asked)
		<-ctx.Done()
		return interaction.Answer{}, ctx.Err()
	}))
	r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	<-asked
	r.Cancel()

	res, err := r.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrCancelled)
	require.Equal(t, engine.Cancelled, res.Status)
	_, errs := a.results()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)

	evs := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "interaction.started", "interaction.cancelled", "tool.cancelled",
		"turn.cancelled", "run.cancelled",
	}, kinds(evs))
	requireOneInteraction(t, evs, "interaction.cancelled")
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK28_AskAfterCallEndedRefused(t *testing.T) {
	// Through the canonical dispatcher the tool's reporter is closed by
	// the dispatcher; through a dispatcher that passes the engine's
	// reporter on unwrapped, the engine refuses by itself.
	for _, tc := range []struct {
		name string
		raw  bool
		want error
	}{
		{"canonical dispatcher", false, tool.ErrReporterClosed},
		{"engine reporter", true, engine.ErrReporterClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stashed tool.Reporter
			progress, err := tool.NewProgress("call-1", "late progress")
			require.NoError(t, err)
			var askErr, reportErr error
			stash := newTool(t, "stash", tool.ReadOnly, func(_ context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
				stashed = r
				return tool.NewResult(call.ID(), "stashed")
			})
			late := newTool(t, "late", tool.ReadOnly, func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
				// Runs on the run's goroutine: record, never require here.
				ask, ok := stashed.(interaction.Asker)
				if !ok {
					return tool.NewResult(call.ID(), "no asker")
				}
				_, askErr = ask.Ask(ctx, "Still there?")
				reportErr = stashed.Report(ctx, progress)
				return tool.NewResult(call.ID(), "late")
			})
			var brokerCalls atomic.Int32
			broker := brokerFunc(func(_ context.Context, q interaction.Question) (interaction.Answer, error) {
				brokerCalls.Add(1)
				return interaction.NewAnswer(q.ID(), "yes"), nil
			})
			f := newFixture(t, fixtureConfig{
				tools:  []tool.Tool{stash, late},
				script: [][]model.Item{callOp("call-1", "stash"), callOp("call-2", "late"), enginetest.Answer("done")},
				mutate: func(c *engine.Config) { c.Broker = broker },
			})
			if tc.raw {
				p, err := plan.New("plan-raw", &rawDispatcher{tools: []enginetest.Tool{stash, late}})
				require.NoError(t, err)
				require.NoError(t, f.plans.Activate(p))
			}
			r, res, err := f.run(t, 4)
			require.NoError(t, err)
			require.Equal(t, engine.Completed, res.Status)

			require.ErrorIs(t, askErr, tc.want)
			require.ErrorIs(t, reportErr, tc.want)
			require.Zero(t, brokerCalls.Load())
			evs := events(t, r)
			require.Equal(t, []string{
				"run.started", "turn.started", "model.started", "model.completed",
				"tool.started", "tool.completed", "turn.completed",
				"turn.started", "model.started", "model.completed",
				"tool.started", "tool.completed", "turn.completed",
				"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed",
				"run.completed",
			}, kinds(evs), "a refused question or report leaves no event")
			requireWellFormed(t, evs)
			if tc.raw {
				require.Equal(t, "plan-raw", payload[event.RunStarted](t, evs, "run.started").PlanID)
			}
			require.NoError(t, f.eng.Close(context.Background()))
		})
	}
}

// A question asked with a context that never ends still ends with the
// run's cancellation: one interaction.cancelled, and the run ends (K24,
// K28).
func TestK28_AskEndsWithRunCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := newLateRun()
		ask := newTool(t, "ask", tool.ReadOnly, func(_ context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
			_, err := r.(interaction.Asker).Ask(context.Background(), "Proceed?")
			require.Error(t, err)
			return tool.NewResult(call.ID(), "no answer")
		})
		broker := brokerFunc(func(ctx context.Context, q interaction.Question) (interaction.Answer, error) {
			late.get().Cancel()
			<-ctx.Done()
			return interaction.Answer{}, ctx.Err()
		})
		f := newFixture(t, fixtureConfig{tools: []tool.Tool{ask}, script: [][]model.Item{callOp("call-1", "ask")},
			mutate: func(c *engine.Config) { c.Broker = broker }})
		r := f.start(t, context.Background(), 4)
		late.set(r)
		_, err := waitRun(r)
		require.ErrorIs(t, err, engine.ErrCancelled)
		evs := events(t, r)
		requireWellFormed(t, evs)
		require.Equal(t, 1, countKind(evs, "interaction.cancelled"))
		require.NoError(t, f.eng.Close(context.Background()))
	})
}

// A question still open when its call ends, whose broker ignores its
// context past the finalization bound, is ended by the engine before the
// call's own terminal; the late answer is dropped (K15, K28).
func TestK28_InteractionOutlivingItsCallIsEndedByTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release, started := make(chan struct{}), make(chan struct{})
		asked := make(chan error, 1)
		ask := newTool(t, "ask", tool.ReadOnly, func(_ context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
			go func() {
				_, err := r.(interaction.Asker).Ask(context.Background(), "Proceed?", "yes")
				asked <- err
			}()
			<-started // the question is with the broker; the call returns
			return tool.NewResult(call.ID(), "asked in the background")
		})
		broker := brokerFunc(func(_ context.Context, q interaction.Question) (interaction.Answer, error) {
			close(started)
			<-release // ignores its context
			return interaction.NewAnswer(q.ID(), "yes"), nil
		})
		f := newFixture(t, fixtureConfig{tools: []tool.Tool{ask}, script: [][]model.Item{callOp("call-1", "ask"), enginetest.Answer("ok")},
			mutate: func(c *engine.Config) { c.Broker = broker; c.FinalizeTimeout = time.Second }})
		r := f.start(t, context.Background(), 4)
		res, err := waitRun(r)
		require.NoError(t, err)
		require.Equal(t, engine.Completed, res.Status)
		close(release)
		require.ErrorIs(t, <-asked, engine.ErrReporterClosed, "the late answer is dropped")
		evs := events(t, r)
		requireWellFormed(t, evs)
		k := kinds(evs)
		require.Equal(t, []string{"tool.started", "interaction.started", "interaction.cancelled", "tool.completed"}, k[4:8])
		require.NoError(t, f.eng.Close(context.Background()))
	})
}
