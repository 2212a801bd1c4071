package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_LateCancelLeavesTheNextJobAlone: on a single slot, whose jobs
// share a context until one is cancelled, a Cancel of a job that has
// ended does nothing: the job stays completed, and the job playing on
// the same slot meanwhile completes.
func TestO8_LateCancelLeavesTheNextJobAlone(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	done := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
	require.Equal(t, scheduler.Completed, wait(t, s, done).State)
	block := newHeld("Second.")
	next := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	require.NoError(t, s.Cancel(done))
	block.Release()
	require.Equal(t, scheduler.Completed, wait(t, s, next).State)
	require.Equal(t, scheduler.Completed, wait(t, s, done).State)

}

// TestO8_CancelledJobsContextEndsWithIt: the job after a cancelled one on
// the same slot plays under a live context and completes.
func TestO8_CancelledJobsContextEndsWithIt(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("Never answered.")
	first := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	second := submit(t, s, cfg)
	require.NoError(t, s.Cancel(first))
	require.Equal(t, scheduler.Cancelled, wait(t, s, first).State)
	require.Equal(t, scheduler.Completed, wait(t, s, second).State)
	require.Equal(t, scheduler.Completed, wait(t, s, submit(t, s, cfg)).State)
}

// endedObserver sends the ID of each pair whose timeline reaches its
// terminal event; ended holds one per job, so a send never blocks.
type endedObserver struct{ ended chan string }

func (o *endedObserver) Observe(_ context.Context, e eventlog.Event) error {
	if orchestrator.Terminal(e.Kind()) {
		o.ended <- e.Payload().(orchestrator.Ended).PairID
	}
	return nil
}

// TestO8_CancelAsTheJobEndsLeavesTheNextAlone: on a single slot, a
// goroutine waits for each job's pair to end, then cancels the job until
// the slot has ended it, so that some Cancels find the job still running
// and arrive as the next job starts under the slot's shared context. Only
// the playing job's Cancel may cancel that context: every job completes.
func TestO8_CancelAsTheJobEndsLeavesTheNextAlone(t *testing.T) {
	const jobs = 400
	s := newScheduler(t, scheduler.Config{Pairs: 1, Queue: 1000})
	obs := &endedObserver{ended: make(chan string, jobs)}
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	cfg.Timeline.Required = []eventlog.Observer{obs}
	stop := make(chan struct{})
	var side errgroup.Group
	side.Go(func() error {
		for {
			var j string
			select {
			case j = <-obs.ended:
			case <-stop:
				return nil
			}
			// Only while j runs may a Cancel reach the slot: the last
			// of these may do so as the next job begins.
			for {
				if err := s.Cancel(j); err != nil {
					return err
				}
				info, err := s.Get(j)
				if err != nil {
					return err
				}
				if info.State != scheduler.Running {
					break
				}
			}
		}
	})
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = submit(t, s, cfg)
	}
	for _, j := range ids {
		wait(t, s, j)
	}
	close(stop)
	require.NoError(t, side.Wait())
	for _, j := range ids {
		require.Equal(t, scheduler.Completed, wait(t, s, j).State, j)
	}
}
