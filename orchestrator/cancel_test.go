package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// approvedInTwoRounds is a review loop with four runs and three handoffs,
// the first writer run with a tool round.
func approvedInTwoRounds(t *testing.T, d orchestrator.Delivery) *harness {
	h := newHarness(t, orchestrator.ReviewLoop,
		append(toolThenAnswer("Draft one."), enginetest.Answer("Draft two.")),
		script{enginetest.Answer("Shorter."), enginetest.Answer("APPROVED")}, enginetest.Echo())
	h.cfg.Timeline.Delivery = d
	return h
}

// TestO6_CancelAtEveryTimelineBoundary cancels the pair from a required
// timeline observer at sequence k, for every k of an uncancelled pair's
// timeline, by the pair's context and by Pair.Cancel, with both
// deliveries. Every time: one pair terminal (cancelled unless k is the
// terminal itself), no run started after k, every started run ended.
func TestO6_CancelAtEveryTimelineBoundary(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		full, _, err := approvedInTwoRounds(t, d).run(t)
		require.NoError(t, err)
		n := full.Stats().LastSeq
		require.Greater(t, n, uint64(30))
		for _, how := range []string{"context", "Cancel"} {
			for k := uint64(1); k <= n; k++ {
				t.Run(fmt.Sprintf("%s/%s/seq-%d", d, how, k), func(t *testing.T) {
					cancelAt(t, d, how, k, n)
				})
			}
		}
	}
}

func cancelAt(t *testing.T, d orchestrator.Delivery, how string, k, n uint64) {
	h := approvedInTwoRounds(t, d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reached, resume := make(chan struct{}), make(chan struct{})
	h.cfg.Timeline.Required = append(h.cfg.Timeline.Required, eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
		if e.Seq() != k {
			return nil
		}
		if how == "context" {
			cancel()
			return nil
		}
		close(reached) // the test goroutine calls Pair.Cancel, then resumes us
		<-resume
		return nil
	}))
	var p *orchestrator.Pair
	var err error
	if how == "context" {
		p, err = orchestrator.Run(ctx, h.cfg)
		require.NoError(t, err)
	} else {
		p, err = orchestrator.Start(ctx, h.cfg)
		require.NoError(t, err)
		<-reached
		p.Cancel()
		close(resume)
	}
	res, err := p.Wait(context.Background())

	evs := timeline(t, p)
	end := requireTimeline(t, evs)
	if k < n {
		require.Equal(t, orchestrator.KindCancelled, end.Kind())
		require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
		require.ErrorIs(t, err, orchestrator.ErrCancelled)
		require.ErrorIs(t, err, context.Canceled)
	} else {
		require.Equal(t, orchestrator.KindCompleted, end.Kind(), "a cancel after the terminal changes nothing")
		require.NoError(t, err)
	}
	for _, e := range evs {
		if e.Kind() == event.KindRunStarted {
			require.LessOrEqual(t, e.Seq(), k, "a run started after the cancellation")
		}
	}
	require.Equal(t, res.Runs, len(relayed(evs, event.KindRunStarted)))
	require.Zero(t, h.memory.Stats().Outstanding, "every lease released")
}

// TestO6_CancelCancelsTheActiveRun stops a pair while its first run is
// inside a model operation, by Pair.Cancel and by the caller's context:
// the run ends cancelled and no further run starts.
func TestO6_CancelCancelsTheActiveRun(t *testing.T) {
	for _, how := range []string{"Cancel", "context"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, orchestrator.Relay, nil, script{enginetest.Answer("never")})
			streaming := make(chan struct{})
			h.cfg.First.Engine.Provider = &blockingProvider{started: streaming}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := orchestrator.Start(ctx, h.cfg)
			require.NoError(t, err)
			<-streaming
			if how == "Cancel" {
				p.Cancel()
			} else {
				cancel()
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer wcancel()
			res, err := p.Wait(wctx) // bounded: a run nobody cancels never ends
			require.ErrorIs(t, err, orchestrator.ErrCancelled)
			require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
			require.Equal(t, 1, res.Runs)
			require.Zero(t, h.second.Calls())

			evs := timeline(t, p)
			end := requireTimeline(t, evs)
			require.Equal(t, orchestrator.KindCancelled, end.Kind())
			require.Len(t, relayed(evs, event.KindRunCancelled), 1)
			require.Len(t, relayed(evs, event.KindModelCancelled), 1)

			p.Cancel() // after the end: nothing changes
			res2, err2 := p.Wait(context.Background())
			require.Equal(t, res, res2)
			require.Equal(t, err, err2)
		})
	}
}

// cancelOnSecondLease cancels the caller's context while the second run's
// plan lease is taken: inside worker.Run, after the pair last checked for a
// stop and before the run is registered with its engine.
type cancelOnSecondLease struct {
	plan.Source
	n      atomic.Int32
	cancel context.CancelFunc
}

func (s *cancelOnSecondLease) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	if s.n.Add(1) == 2 {
		s.cancel()
	}
	return s.Source.LeaseExact(ctx, planID)
}

// TestO6_CallerCancelDuringRunSetupStartsNoModelOperation: once the
// caller's cancel has returned, no model operation starts, even when it
// lands while the next run is being set up.
func TestO6_CallerCancelDuringRunSetupStartsNoModelOperation(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("Draft.")}, script{enginetest.Answer("Final.")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.cfg.Plans = &cancelOnSecondLease{Source: h.memory, cancel: cancel}
	p, err := orchestrator.Run(ctx, h.cfg)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrCancelled)
	require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
	require.Zero(t, h.second.Calls(), "the second worker's model was called after the cancel")
	require.Zero(t, h.memory.Stats().Outstanding, "every lease released")
}

// ctxProvider records what its context tells a model operation, and with
// block streams nothing until that context ends.
type ctxProvider struct {
	*enginetest.Provider
	block    bool
	started  chan struct{}
	deadline time.Time
	hasDL    bool
	value    any
	cause    error
}

type ctxKey struct{}

func (p *ctxProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.deadline, p.hasDL = ctx.Deadline()
	p.value = ctx.Value(ctxKey{})
	if p.block {
		close(p.started)
		<-ctx.Done()
		p.cause = context.Cause(ctx)
		return nil, ctx.Err()
	}
	return p.Provider.Stream(ctx, req)
}

// TestO6_RunsLiveUnderTheCallersContext: a run's model operations see the
// caller's deadline and values, so providers and tools can fit their own
// timeouts to it, and the caller's cancellation reaches them with its
// cause.
func TestO6_RunsLiveUnderTheCallersContext(t *testing.T) {
	t.Run("deadline and values", func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("Draft.")}, script{enginetest.Answer("Final.")})
		cp := &ctxProvider{Provider: h.first}
		h.cfg.First.Engine.Provider = cp
		deadline := time.Now().Add(time.Hour)
		ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "host"), deadline)
		defer cancel()
		p, err := orchestrator.Run(ctx, h.cfg)
		require.NoError(t, err)
		_, err = p.Wait(context.Background())
		require.NoError(t, err)
		require.True(t, cp.hasDL, "the caller's deadline reached the model operation")
		require.True(t, cp.deadline.Equal(deadline))
		require.Equal(t, "host", cp.value)
	})
	t.Run("cancellation cause", func(t *testing.T) {
		h := newHarness(t, orchestrator.Relay, nil, script{enginetest.Answer("never")})
		cp := &ctxProvider{block: true, started: make(chan struct{})}
		h.cfg.First.Engine.Provider = cp
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		p, err := orchestrator.Start(ctx, h.cfg)
		require.NoError(t, err)
		<-cp.started
		errShutdown := errors.New("host shutting down")
		cancel(errShutdown)
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		_, err = p.Wait(wctx)
		require.ErrorIs(t, err, orchestrator.ErrCancelled)
		require.ErrorIs(t, cp.cause, errShutdown)
	})
}
