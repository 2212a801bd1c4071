package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Started hands the pair out while Run plays it on the caller's goroutine:
// once, after pair.started and before the first run, so that another
// goroutine can follow the timeline live and cancel the pair.
func TestO7_StartedHandsOutThePairWhileRunPlaysIt(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, nil, script{enginetest.Answer("never")})
	streaming := make(chan struct{})
	h.cfg.First.Engine.Provider = &blockingProvider{started: streaming}
	handed := make(chan *orchestrator.Pair, 1)
	calls := 0
	// The hook runs inside Run: it reports with t.Errorf, since FailNow
	// there would leave the pair unfinished.
	h.cfg.Started = func(p *orchestrator.Pair) {
		calls++
		if got := p.Stats().LastSeq; got != 1 {
			t.Errorf("Started after %d events, want right after pair.started", got)
		}
		sub, err := p.Subscribe(context.Background(), 0)
		if err != nil {
			t.Errorf("Subscribe in Started: %v", err)
		} else if first, err := sub.Next(context.Background()); err != nil || first.Kind() != orchestrator.KindStarted {
			t.Errorf("first event %q, %v; want %s", first.Kind(), err, orchestrator.KindStarted)
		}
		if sub != nil {
			sub.Close()
		}
		handed <- p
	}
	followed := make(chan []string, 1)
	go func() {
		var p *orchestrator.Pair
		select {
		case p = <-handed:
		case <-time.After(10 * time.Second):
			followed <- nil // Started was never called
			return
		}
		sub, err := p.Subscribe(context.Background(), 0)
		if err != nil {
			followed <- nil
			return
		}
		var ks []string
		for e, err := range sub.All(context.Background()) {
			if err != nil {
				break
			}
			ks = append(ks, e.Kind())
			if e.Kind() == event.KindModelStarted {
				<-streaming
				p.Cancel()
			}
		}
		followed <- ks
	}()
	// Bounded: without a Started call nobody would cancel the blocked run.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := orchestrator.Run(ctx, h.cfg)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrCancelled)
	require.Equal(t, orchestrator.ReasonCancelled, res.Reason)
	require.Equal(t, 1, calls)
	require.Equal(t, kinds(timeline(t, p)), <-followed, "the follower saw the whole timeline live")
}

// A panic in Started ends the pair before any run, with one terminal.
func TestO5_StartedPanicEndsThePairOnceBeforeAnyRun(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("draft")}, script{enginetest.Answer("ok")})
	h.cfg.Started = func(*orchestrator.Pair) { panic("host bug") }
	p, err := orchestrator.Run(context.Background(), h.cfg)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	require.Error(t, err)
	require.Equal(t, orchestrator.ReasonInfrastructure, res.Reason)
	require.Zero(t, res.Runs)
	require.Zero(t, h.first.Calls())
	evs := timeline(t, p)
	requireTimeline(t, evs)
	require.Equal(t, []string{orchestrator.KindStarted, orchestrator.KindFailed}, kinds(evs))
	require.Zero(t, h.memory.Stats().Outstanding, "the lease is released")
}
