package engine_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// panicSecret is the panic value of every injected panic: it must not reach an
// error text or an event.
const panicSecret = "sk-secret-123"

// The uncancelled, unpanicked run of cancelScript (see cancel_test.go).
var (
	toolTurnKinds = []string{"turn.started", "model.started", "model.text_delta", "model.completed", "tool.started", "tool.completed", "turn.completed"}
	fullRunKinds  = concatKinds([]string{"run.started"}, toolTurnKinds, answerTurn, []string{"run.completed"})
)

// panicDispatcher is a plan's dispatcher whose Dispatch panics.
type panicDispatcher struct{ *tool.Canonical }

func (panicDispatcher) Dispatch(context.Context, tool.Call, tool.Reporter) (tool.Result, error) {
	panic(panicSecret)
}

// panicReleaseSource is a third-party plan.Source whose leases' release callback
// panics.
type panicReleaseSource struct {
	p        plan.Plan
	inline   bool
	releases atomic.Int64
}

func (s *panicReleaseSource) Lease(context.Context) (*plan.Lease, error) {
	return plan.NewLease(s.p, func() error {
		s.releases.Add(1)
		panic(panicSecret)
	}, plan.LeaseConfig{Inline: s.inline})
}

func (s *panicReleaseSource) LeaseExact(ctx context.Context, _ plan.ID) (*plan.Lease, error) {
	return s.Lease(ctx)
}

// panickingSource is a plan.Source whose Lease panics.
type panickingSource struct{}

func (panickingSource) Lease(context.Context) (*plan.Lease, error) { panic(panicSecret) }

func (panickingSource) LeaseExact(context.Context, plan.ID) (*plan.Lease, error) { panic(panicSecret) }

func planWith(t *testing.T, d tool.Dispatcher) plan.Plan {
	t.Helper()
	p, err := plan.New("plan-1", d)
	require.NoError(t, err)
	return p
}

func dispatcherOf(t *testing.T, tools ...tool.Tool) *tool.Canonical {
	t.Helper()
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	require.NoError(t, err)
	return d
}

func TestK25_PanicsContained(t *testing.T) {
	scripted := func(recv func() (model.Item, error), close func() error) model.Provider {
		return providerFunc(func(context.Context, model.Request) (model.Stream, error) {
			return &funcStream{recv: recv, close: close}, nil
		})
	}
	panicAt := func(n int64) model.Provider {
		return scripted(func() func() (model.Item, error) {
			var i atomic.Int64
			items := []model.Item{enginetest.Text("a"), enginetest.Done(1, 1)}
			return func() (model.Item, error) {
				if k := i.Add(1); k >= n {
					panic(panicSecret)
				} else if int(k) <= len(items) {
					return items[k-1], nil
				}
				return model.Item{}, errInjected
			}
		}(), nil)
	}
	panicObserver := func(at uint64) eventlog.Observer {
		return eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
			if e.Seq() == at {
				panic(panicSecret)
			}
			return nil
		})
	}
	var releases *panicReleaseSource // set by the release cases

	for _, tc := range []struct {
		name      string
		mutate    func(t *testing.T, c *engine.Config)
		startCode string   // Start fails with a *engine.Failure with this code
		kinds     []string // else: the run's events
		code      string   // and Wait's *engine.Failure code ("" with durable)
		durable   bool     // Wait returns a *engine.DurabilityError
		check     func(t *testing.T, err error, evs []eventlog.Event)
	}{
		{name: "provider.Stream", kinds: modelFailure(0), code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) {
				c.Provider = providerFunc(func(context.Context, model.Request) (model.Stream, error) { panic(panicSecret) })
			},
			check: func(t *testing.T, _ error, evs []eventlog.Event) {
				require.False(t, payloadOf[event.ModelFailed](t, evs[3]).Observed)
			}},
		{name: "stream.Recv first", kinds: modelFailure(0), code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.Provider = panicAt(1) }},
		{name: "stream.Recv after an item", kinds: modelFailure(1), code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.Provider = panicAt(2) },
			check: func(t *testing.T, _ error, evs []eventlog.Event) {
				require.True(t, payloadOf[event.ModelFailed](t, evs[4]).Observed)
			}},
		{name: "stream.Close", kinds: modelFailure(1), code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) {
				c.Provider = scripted(itemsThen(io.EOF, enginetest.Text("a"), enginetest.Done(1, 1)), func() error { panic(panicSecret) })
			}},
		{name: "tool.Execute", code: "tool_panic",
			kinds: concatKinds([]string{"run.started"}, toolTurnKinds[:5], []string{"tool.failed", "turn.failed", "run.failed"}),
			mutate: func(t *testing.T, c *engine.Config) {
				boom := readOnlyTool(t, "echo", func(context.Context, tool.Call, tool.Reporter) (tool.Result, error) { panic(panicSecret) })
				c.Plans = mustValue(plan.NewMemory(planWith(t, dispatcherOf(t, boom))))
			},
			check: func(t *testing.T, err error, _ []eventlog.Event) { require.ErrorIs(t, err, tool.ErrPanic) }},
		{name: "dispatcher", code: engine.CodePanic,
			kinds: concatKinds([]string{"run.started"}, toolTurnKinds[:5], []string{"tool.failed", "turn.failed", "run.failed"}),
			mutate: func(t *testing.T, c *engine.Config) {
				c.Plans = mustValue(plan.NewMemory(planWith(t, panicDispatcher{dispatcherOf(t, enginetest.Echo())})))
			}},
		{name: "required observer", kinds: modelFailure(0), code: engine.CodeObserverFailed,
			mutate: func(_ *testing.T, c *engine.Config) { c.Required = append(c.Required, panicObserver(3)) },
			check: func(t *testing.T, err error, _ []eventlog.Event) {
				var oe *eventlog.ObserverError
				require.ErrorAs(t, err, &oe)
				require.Equal(t, uint64(3), oe.Seq)
				require.ErrorIs(t, err, eventlog.ErrObserverPanic)
			}},
		{name: "required observer on the run terminal", kinds: fullRunKinds, durable: true,
			mutate: func(_ *testing.T, c *engine.Config) { c.Required = append(c.Required, panicObserver(14)) },
			check: func(t *testing.T, err error, _ []eventlog.Event) {
				var de *engine.DurabilityError
				require.ErrorAs(t, err, &de)
				require.Equal(t, uint64(14), de.Seq)
				require.NoError(t, de.Outcome, "the run itself completed")
				require.ErrorIs(t, err, eventlog.ErrObserverPanic)
			}},
		{name: "ID source for the run ID", startCode: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.IDs = &countingIDs{panicAt: 1, panicValue: panicSecret} }},
		{name: "ID source for the turn ID", kinds: []string{"run.started", "run.failed"}, code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.IDs = &countingIDs{panicAt: 2, panicValue: panicSecret} }},
		{name: "ID source for the model operation ID", kinds: []string{"run.started", "turn.started", "turn.failed", "run.failed"}, code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.IDs = &countingIDs{panicAt: 3, panicValue: panicSecret} }},
		{name: "ID source for the tool operation ID", code: engine.CodePanic,
			kinds:  concatKinds([]string{"run.started"}, toolTurnKinds[:4], []string{"turn.failed", "run.failed"}),
			mutate: func(_ *testing.T, c *engine.Config) { c.IDs = &countingIDs{panicAt: 4, panicValue: panicSecret} }},
		{name: "clock", kinds: modelFailure(0), code: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) {
				var n atomic.Int64
				c.Clock = engine.ClockFunc(func() time.Time {
					if n.Add(1) >= 3 {
						panic(panicSecret)
					}
					return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				})
			},
			check: func(t *testing.T, _ error, evs []eventlog.Event) {
				require.Equal(t, 2026, evs[1].Time().Year())
				for _, e := range evs[2:] {
					require.Equal(t, time.Unix(0, 0).UTC(), e.Time(), "events after the panic get the zero Unix time")
				}
			}},
		{name: "plan source Lease", startCode: engine.CodePanic,
			mutate: func(_ *testing.T, c *engine.Config) { c.Plans = panickingSource{} }},
		{name: "lease release callback", kinds: concatKinds(fullRunKinds[:13], []string{"run.failed"}), code: engine.CodeReleaseFailed,
			mutate: func(t *testing.T, c *engine.Config) {
				releases = &panicReleaseSource{p: planWith(t, dispatcherOf(t, enginetest.Echo()))}
				c.Plans = releases
			},
			check: func(t *testing.T, err error, _ []eventlog.Event) {
				var re *plan.ReleaseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, plan.ReleasePanicked, re.Reason)
				require.Equal(t, int64(1), releases.releases.Load())
			}},
		{name: "inline lease release callback", kinds: concatKinds(fullRunKinds[:13], []string{"run.failed"}), code: engine.CodeReleaseFailed,
			mutate: func(t *testing.T, c *engine.Config) {
				releases = &panicReleaseSource{p: planWith(t, dispatcherOf(t, enginetest.Echo())), inline: true}
				c.Plans = releases
			},
			check: func(t *testing.T, err error, _ []eventlog.Event) {
				var re *plan.ReleaseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, int64(1), releases.releases.Load())
			}},
		{name: "release callback after a failed start", startCode: engine.CodeReleaseFailed,
			mutate: func(t *testing.T, c *engine.Config) {
				releases = &panicReleaseSource{p: planWith(t, dispatcherOf(t, enginetest.Echo()))}
				c.Plans = releases
				c.IDs = &countingIDs{panicAt: 1, panicValue: panicSecret}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var plans plan.Source // the source the run really used
			f := newFixture(t, fixtureConfig{
				tools:  []tool.Tool{enginetest.Echo()},
				script: cancelScript(),
				mutate: func(c *engine.Config) { tc.mutate(t, c); plans = c.Plans },
			})
			requireReleased := func(msg string) {
				if m, ok := plans.(*plan.Memory); ok {
					require.Zero(t, m.Outstanding(m.Current().ID()), msg)
				}
			}
			r, err := f.eng.Start(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
			if tc.startCode != "" {
				requireFailure(t, err, tc.startCode)
				require.Nil(t, r)
				require.Empty(t, f.rec.Events(), "nothing before the run exists")
				requireReleased("no lease is left behind")
				requireNoSecret(t, panicSecret, err, nil)
				return
			}
			require.NoError(t, err)
			res, err := waitRun(r)
			evs := events(t, r)
			require.Equal(t, tc.kinds, kinds(evs))
			requireWellFormed(t, evs)
			require.Equal(t, kinds(evs), f.rec.Kinds())
			if tc.durable {
				var de *engine.DurabilityError
				require.ErrorAs(t, err, &de)
			} else {
				requireFailure(t, err, tc.code)
				require.Equal(t, engine.Failed, res.Status)
				require.Equal(t, tc.code, res.Problem.Code())
				ended := payloadOf[event.RunFailed](t, evs[len(evs)-1])
				require.Equal(t, tc.code, ended.Problem.Code())
			}
			requireNoSecret(t, panicSecret, err, evs)
			require.NotContains(t, res.Problem.String(), panicSecret)
			requireReleased("the lease was released")
			if tc.check != nil {
				tc.check(t, err, evs)
			}
			require.NoError(t, f.eng.Close(context.Background()))
		})
	}
}

func mustValue[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var _ id.Source = (*countingIDs)(nil)
