package engine_test

import (
	"context"
	"errors"
	"sync"
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
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// A mutating call stopped mid-effect by the run's cancellation reports an
// uncertain outcome: the cancelled event keeps it, and the run cannot be
// exported in a snapshot (K7, K29).
func TestK29_CancelledMutatingCallKeepsUncertainOutcome(t *testing.T) {
	late := newLateRun()
	write := newTool(t, "write", tool.Mutating, func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		late.get().Cancel()
		<-ctx.Done()
		return tool.Result{}, tool.FailUncertain(call.ID(), problem.Must("interrupted", "the write was interrupted"), ctx.Err())
	})
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{write}, script: [][]model.Item{callOp("call-1", "write")}})
	r := f.start(t, context.Background(), 4)
	late.set(r)
	_, err := waitRun(r)
	require.ErrorIs(t, err, engine.ErrCancelled)
	evs := events(t, r)
	requireWellFormed(t, evs)
	require.Equal(t, "uncertain", payload[event.ToolCancelled](t, evs, "tool.cancelled").Outcome)
	_, err = r.Snapshot()
	require.ErrorIs(t, err, engine.ErrSnapshotRefused)
	require.NoError(t, f.eng.Close(context.Background()))
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

// Observers that spend the finalization budget do not make a good lease
// release look failed: the cancelled run ends cancelled (K14, K26).
func TestK14_ReleaseNotBlamedForSpentFinalizeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		memory, err := enginetest.Plan("plan-1")
		require.NoError(t, err)
		p := memory.Current()
		src := &releaseSource{plan: p, release: func() error { return nil }, cfg: plan.LeaseConfig{}}
		late := newLateRun()
		f := newFixture(t, fixtureConfig{
			script: [][]model.Item{{enginetest.Text("a"), enginetest.Text("b"), enginetest.Done(1, 1)}},
			mutate: func(c *engine.Config) { c.Plans = src; c.FinalizeTimeout = time.Second },
		})
		f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
			switch e.Kind() {
			case "model.text_delta":
				late.get().Cancel()
			case "model.cancelled":
				<-ctx.Done() // spends the whole finalization budget
				return nil
			}
			return nil
		}
		r := f.start(t, context.Background(), 4)
		late.set(r)
		res, err := waitRun(r)
		require.Equal(t, engine.Cancelled, res.Status)
		require.ErrorIs(t, err, engine.ErrCancelled)
		require.Equal(t, "run.cancelled", f.rec.Kinds()[len(f.rec.Kinds())-1])
		require.NoError(t, f.eng.Close(context.Background()))
	})
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

// Resuming the same snapshot twice while the first is active is refused:
// two runs never share an ID and a sequence (K29).
func TestK29_ResumeRefusesActiveRunID(t *testing.T) {
	f, b := suspendedToolRun(t)
	hold, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "turn.started" {
			once.Do(func() { close(hold); <-release })
		}
		return nil
	}
	first, err := f.eng.Resume(context.Background(), b)
	require.NoError(t, err)
	<-hold // the first resumed run is active
	_, err = f.eng.Resume(context.Background(), b)
	require.ErrorIs(t, err, engine.ErrRunActive)
	close(release)
	_, err = waitRun(first)
	require.NoError(t, err)
	require.Zero(t, f.plans.Outstanding("plan-1"), "the refused resume gave its lease back")
	require.NoError(t, f.eng.Close(context.Background()))
}

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

// A suspended run has ended when Wait returns, even while its log is still
// closing (a best-effort observer draining): resuming its snapshot at once
// is not refused as a duplicate, and Close still waits for both runs (K27,
// K29).
func TestK29_ResumeRightAfterWaitWhileTheOldLogCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		releaseOnce := sync.OnceFunc(func() { close(release) })
		defer releaseOnce() // also when a check fails: no goroutine stays blocked
		var blocked atomic.Bool
		stuck := make(chan struct{})
		slow := eventlog.ObserverFunc(func(context.Context, eventlog.Event) error {
			if blocked.CompareAndSwap(false, true) { // the first event only
				close(stuck)
				<-release
			}
			return nil
		})
		f, b := suspendedToolRunWith(t, func(c *engine.Config) {
			c.BestEffort = []eventlog.Observer{slow}
			c.FinalizeTimeout = time.Minute
		})
		<-stuck // the old run's log cannot finish closing until release
		f.rec.Hook = nil
		second, err := f.eng.Resume(context.Background(), b)
		require.NoError(t, err, "the suspended run has ended: its ID is free")
		_, err = waitRun(second)
		require.NoError(t, err)

		closed := make(chan error, 1)
		go func() { closed <- f.eng.Close(context.Background()) }()
		synctest.Wait() // everything else is blocked: Close is waiting
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while a run's observer was still draining", err)
		default:
		}
		releaseOnce()
		require.NoError(t, <-closed)
	})
}
