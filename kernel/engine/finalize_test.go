package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

// textRunKinds are the events of a run that answers "Hi" in one turn.
var textRunKinds = []string{
	"run.started", "turn.started", "model.started", "model.text_delta",
	"model.completed", "turn.completed", "run.completed",
}

// sourceFixture is a text-run fixture whose plans come from a releaseSource.
func sourceFixture(t testing.TB, release func() error, cfg plan.LeaseConfig) *fixture {
	t.Helper()
	f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("Hi")}})
	src := &releaseSource{plan: f.plans.Current(), release: release, cfg: cfg}
	eng, err := engine.New(engine.Config{
		Provider: f.provider, Plans: src, IDs: &id.Counter{}, Clock: &enginetest.Clock{},
		Required: []eventlog.Observer{f.rec},
	})
	require.NoError(t, err)
	f.eng = eng
	return f
}

func TestK14_FailingLeaseReleaseFailsRun(t *testing.T) {
	errRelease := errors.New("release refused")
	var calls atomic.Int32
	f := sourceFixture(t, func() error { calls.Add(1); return errRelease }, plan.LeaseConfig{})

	r, res, err := f.run(t, 4)

	var fail *engine.Failure
	require.ErrorAs(t, err, &fail)
	require.Equal(t, engine.CodeReleaseFailed, fail.Problem.Code())
	var re *plan.ReleaseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, plan.ReleaseFailed, re.Reason)
	require.ErrorIs(t, err, errRelease)
	require.Equal(t, engine.Failed, res.Status)
	require.Equal(t, engine.CodeReleaseFailed, res.Problem.Code())
	require.Equal(t, int32(1), calls.Load(), "released exactly once")

	evs := events(t, r)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.text_delta",
		"model.completed", "turn.completed", "run.failed",
	}, kinds(evs), "the release failure is the only run terminal")
	requireWellFormed(t, evs)
	require.Equal(t, 1, runTerminals(evs))
	require.Equal(t, engine.CodeReleaseFailed, payload[event.RunFailed](t, evs, "run.failed").Problem.Code())
	require.Equal(t, kinds(evs), f.rec.Kinds())
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK14_BlockingLeaseReleaseIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 100 * time.Millisecond
		unblock := make(chan struct{})
		var returned atomic.Bool
		f := sourceFixture(t, func() error {
			<-unblock
			returned.Store(true)
			return nil
		}, plan.LeaseConfig{ReleaseTimeout: bound})

		start := time.Now()
		r, res, err := f.run(t, 4)
		require.Equal(t, bound, time.Since(start), "the run waited for its release exactly the lease's bound")

		var re *plan.ReleaseError
		require.ErrorAs(t, err, &re)
		require.Equal(t, plan.ReleaseTimedOut, re.Reason)
		require.Equal(t, bound, re.Timeout)
		var fail *engine.Failure
		require.ErrorAs(t, err, &fail)
		require.Equal(t, engine.CodeReleaseFailed, fail.Problem.Code())
		require.Equal(t, engine.Failed, res.Status)
		require.False(t, returned.Load(), "the callback is still blocked")

		evs := events(t, r)
		require.Equal(t, []string{
			"run.started", "turn.started", "model.started", "model.text_delta",
			"model.completed", "turn.completed", "run.failed",
		}, kinds(evs))
		require.Equal(t, 1, runTerminals(evs))
		requireWellFormed(t, evs)

		// The callback keeps running on its own goroutine until it
		// returns; once it does, nothing is left behind.
		close(unblock)
		synctest.Wait()
		require.True(t, returned.Load())
		require.NoError(t, f.eng.Close(context.Background()))
	})
}

func TestK26_ObserverFailureDuringTerminal(t *testing.T) {
	errStore := errors.New("store unavailable")
	f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("Hi")}})
	f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "run.completed" {
			return errStore
		}
		return nil
	}

	r, res, err := f.run(t, 4)

	var de *engine.DurabilityError
	require.ErrorAs(t, err, &de)
	require.Equal(t, uint64(7), de.Seq, "the run terminal's sequence")
	require.NoError(t, de.Outcome, "the run itself completed")
	require.ErrorIs(t, err, errStore)
	var oe *eventlog.ObserverError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, de.Seq, oe.Seq)
	require.Equal(t, engine.Completed, res.Status)
	require.Equal(t, de.Seq, res.LastSeq)

	evs := events(t, r)
	require.Equal(t, textRunKinds, kinds(evs))
	require.Equal(t, "run.completed", evs[de.Seq-1].Kind())
	require.Equal(t, de.Seq, evs[de.Seq-1].Seq(), "the terminal stays committed with its sequence")
	requireWellFormed(t, evs)
	require.NoError(t, f.eng.Close(context.Background()))
}

func TestK26_FinalizationIgnoresCallerCancellation(t *testing.T) {
	f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("Hi")}})
	reached, release := make(chan struct{}), make(chan struct{})
	var ctxErrs []error // written by the run goroutine, read after Wait
	f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
		if e.Kind() == "model.started" {
			close(reached)
			<-release
		}
		ctxErrs = append(ctxErrs, ctx.Err())
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := f.eng.Start(ctx, definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	<-reached
	cancel()
	close(release)

	res, err := r.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrCancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, engine.Cancelled, res.Status)

	want := []string{"run.started", "turn.started", "model.started", "model.cancelled", "turn.cancelled", "run.cancelled"}
	evs := events(t, r)
	require.Equal(t, want, kinds(evs))
	requireWellFormed(t, evs)
	require.Equal(t, want, f.rec.Kinds(), "the required observer saw every terminal")
	for i, err := range ctxErrs {
		require.NoError(t, err, "observer context of event %d was cut by the caller", i+1)
	}
	require.NoError(t, f.eng.Close(context.Background()))
}

// TestK26_BlockingObserverBoundedByFinalizeTimeout: an observer that blocks
// the terminal holds Wait for exactly the finalization bound, which starts
// with finalization, not when the observer first waits on its context: time
// it spends first counts against the bound.
func TestK26_BlockingObserverBoundedByFinalizeTimeout(t *testing.T) {
	for _, busy := range []time.Duration{0, 1500 * time.Millisecond} {
		t.Run("busy "+busy.String()+" before waiting", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const bound = 2 * time.Second
				f := newFixture(t, fixtureConfig{
					script: [][]model.Item{enginetest.Answer("Hi")},
					mutate: func(c *engine.Config) { c.FinalizeTimeout = bound },
				})
				f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
					if e.Kind() == "run.completed" {
						time.Sleep(busy) // not looking at its context
						<-ctx.Done()     // blocks forever unless its context ends
						return ctx.Err()
					}
					return nil
				}

				start := time.Now()
				r, res, err := f.run(t, 4)
				require.Equal(t, bound, time.Since(start), "Wait returned after exactly the finalization bound")

				var de *engine.DurabilityError
				require.ErrorAs(t, err, &de)
				require.Equal(t, uint64(7), de.Seq)
				require.NoError(t, de.Outcome)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, engine.Completed, res.Status)

				evs := events(t, r)
				require.Equal(t, textRunKinds, kinds(evs))
				requireWellFormed(t, evs)
				require.NoError(t, f.eng.Close(context.Background()))
			})
		})
	}
}

// TestK17_ObserverContextEndsWithTheRun: a context a required observer kept
// from an ordinary event ends, cancelled, once the run has ended, whether
// the observer had started its bound (asked for Done) or not.
func TestK17_ObserverContextEndsWithTheRun(t *testing.T) {
	for _, asked := range []bool{true, false} {
		t.Run(fmt.Sprintf("asked=%v", asked), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, fixtureConfig{
					script: [][]model.Item{enginetest.Answer("Hi")},
					mutate: func(c *engine.Config) { c.FinalizeTimeout = engine.MaxFinalizeTimeout },
				})
				var kept context.Context
				f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
					if e.Kind() == "run.started" {
						kept = ctx
						if asked {
							_ = ctx.Done()
						}
					}
					return nil
				}
				_, _, err := f.run(t, 4)
				require.NoError(t, err)
				require.NoError(t, f.eng.Close(context.Background()))
				require.ErrorIs(t, kept.Err(), context.Canceled, "ended with the run, not at its deadline")
				<-kept.Done()
			})
		})
	}
}

func TestK16_ObserverFailureMidRunReportedLater(t *testing.T) {
	// For each sequence k of a text run before its terminal, the observer
	// fails on k: k keeps its event, and the failure is reported by the
	// terminals that follow it.
	cases := map[uint64][]string{
		1: {"run.started", "run.failed"},
		2: {"run.started", "turn.started", "turn.failed", "run.failed"},
		3: {"run.started", "turn.started", "model.started", "model.failed", "turn.failed", "run.failed"},
		4: {"run.started", "turn.started", "model.started", "model.text_delta", "model.failed", "turn.failed", "run.failed"},
		5: {"run.started", "turn.started", "model.started", "model.text_delta", "model.completed", "turn.failed", "run.failed"},
		6: {"run.started", "turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed", "run.failed"},
	}
	for k := uint64(1); k <= 6; k++ {
		t.Run("seq "+strconv.FormatUint(k, 10), func(t *testing.T) {
			errObs := errors.New("observer refused")
			f := newFixture(t, fixtureConfig{script: [][]model.Item{enginetest.Answer("Hi")}})
			f.rec.Hook = func(_ context.Context, e eventlog.Event) error {
				if e.Seq() == k {
					return errObs
				}
				return nil
			}
			r, res, err := f.run(t, 4)

			var fail *engine.Failure
			require.ErrorAs(t, err, &fail)
			require.Equal(t, engine.CodeObserverFailed, fail.Problem.Code())
			var oe *eventlog.ObserverError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, k, oe.Seq)
			require.ErrorIs(t, err, errObs)
			require.Equal(t, engine.Failed, res.Status)
			var de *engine.DurabilityError
			require.False(t, errors.As(err, &de), "the terminals were made durable")

			evs := events(t, r)
			require.Equal(t, cases[k], kinds(evs))
			require.Equal(t, textRunKinds[k-1], evs[k-1].Kind(), "sequence %d keeps its event", k)
			requireWellFormed(t, evs) // no sequence reused, one terminal each
			require.Equal(t, 1, runTerminals(evs))
			for _, e := range evs[k:] {
				switch p := e.Payload().(type) {
				case event.RunFailed:
					require.Equal(t, engine.CodeObserverFailed, p.Problem.Code())
				case event.TurnFailed:
					require.Equal(t, engine.CodeObserverFailed, p.Problem.Code())
				case event.ModelFailed:
					require.Equal(t, engine.CodeObserverFailed, p.Problem.Code())
				}
			}
			require.Equal(t, kinds(evs), f.rec.Kinds())
			require.NoError(t, f.eng.Close(context.Background()))
		})
	}
}

func TestK17_BestEffortObserverNeverBlocksRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = time.Second
		got := make(chan struct{}, 1)
		release := make(chan struct{})
		var seen atomic.Int32
		stuck := eventlog.ObserverFunc(func(context.Context, eventlog.Event) error {
			seen.Add(1)
			got <- struct{}{}
			<-release // blocks until the test ends, whatever its context says
			return nil
		})
		f := newFixture(t, fixtureConfig{
			script: [][]model.Item{enginetest.Answer("Hi")},
			mutate: func(c *engine.Config) {
				c.BestEffort = []eventlog.Observer{stuck}
				c.Limits.Mailbox = 1
				c.FinalizeTimeout = bound
			},
		})
		// Make the drop count exact: hold turn.started until the stuck
		// observer has taken run.started out of its mailbox.
		f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
			if e.Kind() == "turn.started" {
				<-got
			}
			return nil
		}

		start := time.Now()
		r, res, err := f.run(t, 4)
		require.NoError(t, err)
		require.Equal(t, engine.Completed, res.Status)
		require.Zero(t, time.Since(start), "the stuck observer does not delay the run's end at all")

		evs := events(t, r)
		require.Equal(t, textRunKinds, kinds(evs))
		require.Equal(t, textRunKinds, f.rec.Kinds(), "every event reached the required observer")
		require.Equal(t, int32(1), seen.Load(), "the best-effort observer is still stuck on its first event")
		// run.started is being observed, turn.started waits in the
		// mailbox of one, and the five events after it were dropped.
		require.Equal(t, uint64(5), r.Stats().BestEffortDrops)

		// Released within the finalization bound, the observer still gets
		// what its mailbox held; nothing more is dropped.
		close(release)
		<-got
		require.NoError(t, f.eng.Close(context.Background()))
		require.Equal(t, uint64(5), r.Stats().BestEffortDrops)
		require.Equal(t, int32(2), seen.Load())
	})
}

// TestK17_RequiredObserverBoundOnOrdinaryEvents: a required observer may
// block an ordinary (non-terminal) event, but only for a bound between half
// and all of FinalizeTimeout, however many events came before it; then the
// run fails with observer_failed and its terminals are still written. The
// shared bound starts when an observer first asks about it (Deadline, Done
// or Err) and is renewed once less than half of it is left.
func TestK17_RequiredObserverBoundOnOrdinaryEvents(t *testing.T) {
	cases := []struct {
		name  string
		early bool // an earlier event's observer starts the shared bound
		poll  bool // the blocked observer polls Err instead of waiting on Done
	}{
		{name: "bound started by an earlier event", early: true},
		{name: "bound never asked about before"},
		{name: "observer only polls Err", poll: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const bound = 2 * time.Second
				f := newFixture(t, fixtureConfig{
					script: [][]model.Item{enginetest.Answer("Hi")},
					mutate: func(c *engine.Config) { c.FinalizeTimeout = bound },
				})
				var blockedFor time.Duration
				f.rec.Hook = func(ctx context.Context, e eventlog.Event) error {
					switch e.Kind() {
					case "turn.started":
						if tc.early {
							_, _ = ctx.Deadline() // starts the shared bound
						}
						// Time passes between events: without a renewal
						// only a quarter of the bound would be left.
						time.Sleep(1500 * time.Millisecond)
					case "model.started":
						start := time.Now()
						if tc.poll {
							// Gives up by itself long after the bound, so
							// that an unbounded context fails the test
							// instead of hanging it.
							for ctx.Err() == nil && time.Since(start) < 10*bound {
								time.Sleep(100 * time.Millisecond) // retrying something
							}
						} else {
							<-ctx.Done() // blocks until its context ends
						}
						blockedFor = time.Since(start)
						return ctx.Err()
					}
					return nil
				}
				_, res, err := f.run(t, 4)
				require.GreaterOrEqual(t, blockedFor, bound/2)
				require.LessOrEqual(t, blockedFor, bound)
				require.Equal(t, engine.Failed, res.Status)
				require.Equal(t, engine.CodeObserverFailed, res.Problem.Code())
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Equal(t, []string{"run.started", "turn.started", "model.started", "model.failed", "turn.failed", "run.failed"}, f.rec.Kinds())
				require.NoError(t, f.eng.Close(context.Background()))
			})
		})
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
