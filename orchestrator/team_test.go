package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// teamHarness is a harness whose providers answer every request, so that a
// Team can play any number of pairs on it.
func teamHarness(t *testing.T, d orchestrator.Delivery) *harness {
	t.Helper()
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("draft")}, script{enginetest.Answer("fine")})
	h.first.Cycle, h.second.Cycle = true, true
	h.cfg.Timeline.Delivery = d
	return h
}

func newTeam(t *testing.T, cfg orchestrator.Config) *orchestrator.Team {
	t.Helper()
	team, err := orchestrator.NewTeam(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, team.Close(context.Background())) })
	return team
}

// playTeam runs one pair of team on the test goroutine and waits for it.
func playTeam(t *testing.T, team *orchestrator.Team, pairID string) (*orchestrator.Pair, orchestrator.Result, error) {
	t.Helper()
	p, err := team.Run(context.Background(), pairID, task)
	require.NoError(t, err)
	res, err := p.Wait(context.Background())
	return p, res, err
}

// Every pair of a Team is a whole pair: its own timeline, its own runs,
// the plan leased and released once per pair, whichever delivery.
func TestO1_TeamPairsAreWholePairs(t *testing.T) {
	for _, d := range []orchestrator.Delivery{orchestrator.Live, orchestrator.AfterRun} {
		t.Run(d.String(), func(t *testing.T) {
			h := teamHarness(t, d)
			team := newTeam(t, h.cfg)
			runs := map[id.Run]string{}
			for i := range 3 {
				pairID := fmt.Sprintf("pair-%d", i)
				p, res, err := playTeam(t, team, pairID)
				require.NoError(t, err)
				require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
				require.Equal(t, "fine", res.Final.Text())
				require.Equal(t, pairID, p.ID())
				evs := timeline(t, p)
				end := requireTimeline(t, evs)
				require.Equal(t, pairID, end.PairID)
				started := relayed(evs, event.KindRunStarted)
				require.Len(t, started, 2)
				for _, r := range started {
					require.NotContains(t, runs, r.RunID(), "a run relayed into two pairs' timelines")
					runs[r.RunID()] = pairID
				}
				require.Equal(t, []string{"writer", "reviewer"}, []string{started[0].Worker(), started[1].Worker()})
			}
			require.Equal(t, []string{
				"lease plan-1", "exact plan-1", "release-exact plan-1", "exact plan-1", "release-exact plan-1", "release plan-1",
				"lease plan-1", "exact plan-1", "release-exact plan-1", "exact plan-1", "release-exact plan-1", "release plan-1",
				"lease plan-1", "exact plan-1", "release-exact plan-1", "exact plan-1", "release-exact plan-1", "release plan-1",
			}, h.source.Log())
			// The second worker's requests hold one user message each: nothing
			// of an earlier pair's runs on the same engine.
			for _, req := range h.second.Requests() {
				require.Equal(t, 1, req.NumMessages())
			}
		})
	}
}

// A stopped pair shut its crew's engines down; the Team never lends that
// crew again, so the next pair plays on a fresh one.
func TestO6_TeamNeverLendsAStoppedPairsEngines(t *testing.T) {
	for _, stop := range []string{"cancel", "budget"} {
		t.Run(stop, func(t *testing.T) {
			h := teamHarness(t, orchestrator.AfterRun)
			cfg := h.cfg
			if stop == "budget" {
				cfg.Budget.Tokens = 15 // the first run uses 15: the second never starts
			} else {
				cfg.Started = func(p *orchestrator.Pair) {
					if p.ID() == "pair-0" {
						p.Cancel()
					}
				}
			}
			team := newTeam(t, cfg)
			_, res, err := playTeam(t, team, "pair-0")
			require.Error(t, err)
			require.NotEqual(t, orchestrator.ReasonCompleted, res.Reason)
			if stop == "budget" {
				cfg.Budget.Tokens = 0
				team = newTeam(t, cfg) // the stopped crew is not the only one
				_, _, err = playTeam(t, team, "pair-0")
				require.NoError(t, err)
			}
			p, res, err := playTeam(t, team, "pair-1")
			require.NoError(t, err, "the next pair ran on the stopped pair's engines")
			require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
			requireTimeline(t, timeline(t, p))
		})
	}
}

// A stop that comes after its pair has ended reaches nothing: the crew it
// gave back may already be lent to the next pair.
func TestO6_TeamLateStopDoesNotReachTheNextPair(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	var first *orchestrator.Pair
	cfg := h.cfg
	cfg.Started = func(p *orchestrator.Pair) {
		if first != nil && p != first {
			first.Cancel() // the first pair has ended and given its crew back
		}
	}
	team := newTeam(t, cfg)
	first, _, err := playTeam(t, team, "pair-0")
	require.NoError(t, err)
	p, res, err := playTeam(t, team, "pair-1")
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	requireTimeline(t, timeline(t, p))
	res, err = first.Wait(context.Background())
	require.NoError(t, err, "a stop after the end changes nothing")
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
}

// Budgets are per pair: each pair of a Team meters only its own runs,
// however many pairs played on the same engines before it.
func TestO5_TeamBudgetsMeterEachPairAlone(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	cfg := h.cfg
	cfg.Budget.Tokens = 40 // a pair uses 30; three pairs use 90
	team := newTeam(t, cfg)
	for i := range 3 {
		_, res, err := playTeam(t, team, fmt.Sprintf("pair-%d", i))
		require.NoError(t, err)
		require.Equal(t, int64(30), res.Usage.Total())
	}
}

// gatedProvider answers once its gate opens, and counts the operations
// waiting at it.
type gatedProvider struct {
	inner   model.Provider
	gate    chan struct{}
	waiting chan struct{}
}

func (p *gatedProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.waiting <- struct{}{}
	select {
	case <-p.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.inner.Stream(ctx, req)
}

// Pairs of a Team that play at once borrow crews of their own.
func TestO1_TeamConcurrentPairsBorrowTheirOwnCrews(t *testing.T) {
	const n = 4
	h := teamHarness(t, orchestrator.Live)
	gate := make(chan struct{})
	first := &gatedProvider{inner: h.first, gate: gate, waiting: make(chan struct{}, 2*n)}
	cfg := h.cfg
	cfg.First.Engine.Provider = first
	cfg.Timeline.Required = nil
	team := newTeam(t, cfg)
	pairs := make([]*orchestrator.Pair, n)
	for i := range pairs {
		p, err := team.Start(context.Background(), fmt.Sprintf("pair-%d", i), task)
		require.NoError(t, err)
		pairs[i] = p
	}
	for range n {
		<-first.waiting // every pair is in its first run at once
	}
	close(gate)
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Go(func() {
			res, err := p.Wait(context.Background())
			if err != nil || res.Reason != orchestrator.ReasonCompleted {
				t.Errorf("%s: %v %v", p.ID(), res.Reason, err)
			}
		})
	}
	wg.Wait()
	seen := map[id.Run]bool{}
	for _, p := range pairs {
		evs := timeline(t, p)
		requireTimeline(t, evs)
		for _, r := range relayed(evs, event.KindRunStarted) {
			require.False(t, seen[r.RunID()], "run %s relayed into two timelines", r.RunID())
			seen[r.RunID()] = true
		}
	}
	require.Len(t, seen, 2*n)
}

// Close refuses new pairs and waits for the pairs still playing.
func TestTeam_CloseWaitsForPlayingPairsAndRefusesNewOnes(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	gate := make(chan struct{})
	first := &gatedProvider{inner: h.first, gate: gate, waiting: make(chan struct{}, 1)}
	cfg := h.cfg
	cfg.First.Engine.Provider = first
	team, err := orchestrator.NewTeam(cfg)
	require.NoError(t, err)
	p, err := team.Start(context.Background(), "pair-0", task)
	require.NoError(t, err)
	<-first.waiting

	expired, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, team.Close(expired), context.Canceled, "a pair still plays")
	_, err = team.Run(context.Background(), "pair-1", task)
	require.ErrorIs(t, err, orchestrator.ErrTeamClosed)

	closed := make(chan error, 1)
	go func() { closed <- team.Close(context.Background()) }()
	close(gate)
	res, err := p.Wait(context.Background())
	require.NoError(t, err, "Close does not cancel a playing pair")
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	require.NoError(t, <-closed)
}

// Bad input to a Team fails with a typed error and costs the Team nothing:
// the next good pair still plays on the first crew.
func TestTeam_BadInputLeavesTheTeamWhole(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	cfg := h.cfg
	cfg.Second.Role = cfg.First.Role
	_, err := orchestrator.NewTeam(cfg)
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "pair.second.role", be.Field)

	team := newTeam(t, h.cfg)
	_, err = team.Run(context.Background(), "bad id!", task)
	require.ErrorAs(t, err, &be)
	require.Equal(t, "pair.id", be.Field)
	_, err = team.Run(context.Background(), "pair-0", "")
	require.ErrorAs(t, err, &be)
	require.Equal(t, "pair.task", be.Field)

	errSource := errors.New("plan store down")
	h.source.leaseErr = errSource
	_, err = team.Run(context.Background(), "pair-0", task)
	require.ErrorIs(t, err, errSource)
	require.Zero(t, h.first.Calls())

	h.source.leaseErr = nil
	p, res, err := playTeam(t, team, "pair-0")
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	requireTimeline(t, timeline(t, p))
}

// Once Close has returned, every pair it waited for has ended.
func TestTeam_CloseReturnsOnlyOnceItsPairsHaveEnded(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	h.cfg.Timeline.Required = nil
	for i := range 1000 {
		team, err := orchestrator.NewTeam(h.cfg)
		require.NoError(t, err)
		p, err := team.Start(context.Background(), "pair-0", task)
		require.NoError(t, err)
		require.NoError(t, team.Close(context.Background()))
		select {
		case <-p.Done():
		default:
			t.Fatalf("pair %d: Close returned before its pair had ended", i)
		}
	}
}

// A pair's Done closes when it ends, whether it was asked for while the
// pair played or only after; Wait then returns the pair's result at once.
func TestPairDoneClosesAtTheEnd(t *testing.T) {
	h := teamHarness(t, orchestrator.AfterRun)
	gate := make(chan struct{})
	cfg := h.cfg
	cfg.First.Engine.Provider = &gatedProvider{inner: h.first, gate: gate, waiting: make(chan struct{}, 2)} // one model operation per pair
	cfg.Timeline.Required = nil
	team := newTeam(t, cfg)
	p, err := team.Start(context.Background(), "pair-0", task)
	require.NoError(t, err)
	done := p.Done()
	select {
	case <-done:
		t.Fatal("Done closed while the pair waits for its first model")
	default:
	}
	close(gate)
	<-done
	res, err := p.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
	select {
	case <-p.Done():
	default:
		t.Fatal("Done asked for after the end is not closed")
	}

	q, err := team.Run(context.Background(), "pair-1", task)
	require.NoError(t, err)
	select {
	case <-q.Done():
	default:
		t.Fatal("a pair played by Run has not ended when Run returns")
	}
}
