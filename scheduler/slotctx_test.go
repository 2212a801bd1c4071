package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// endedObserver hands the ID of each pair whose timeline reaches its
// terminal event to a goroutine, and waits until that goroutine acks it,
// or until stop: the pair then ends while that goroutine's work runs.
type endedObserver struct {
	ended chan string
	ack   chan struct{}
	stop  <-chan struct{}
}

func (o *endedObserver) Observe(ctx context.Context, e eventlog.Event) error {
	if !orchestrator.Terminal(e.Kind()) {
		return nil
	}
	select {
	case o.ended <- e.Payload().(orchestrator.Ended).PairID:
	case <-o.stop:
		return nil
	case <-ctx.Done():
		return nil
	}
	select {
	case <-o.ack:
	case <-o.stop:
	case <-ctx.Done():
	}
	return nil
}

// TestO8_CancelAsTheJobEndsLeavesTheNextAlone: on a single slot, a
// goroutine is handed each job as its pair ends, starts spinners that
// cancel the job until the slot has ended it, and only then lets the
// pair's observer return, so that the spinners run while the job ends:
// some Cancels find the job still running and arrive as the next job
// starts under the slot's shared context. Only the playing job's Cancel
// may cancel that context: every job completes. The run must have
// Cancels of that window: ones that found the job running (the Get
// before them did) and returned after the next job had started, so that
// they spanned the slot's move to it. Each job leaves Running within
// endBound, or the test fails.
func TestO8_CancelAsTheJobEndsLeavesTheNextAlone(t *testing.T) {
	// Several spinners, so that some Cancel is delayed (on a lock, say)
	// between reading the job and reaching the slot: with one, a slot
	// that let any Cancel through was caught in about half the runs.
	const jobs, spinners = 400, 3
	// A job leaves Running this long at most after its pair has ended.
	const endBound = 10 * time.Second
	name := scheduler.Sequential("job-")
	s := newScheduler(t, scheduler.Config{Pairs: 1, Queue: 1000, IDs: name})
	stop := make(chan struct{})
	obs := &endedObserver{ended: make(chan string), ack: make(chan struct{}), stop: stop}
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	cfg.Timeline.Required = []eventlog.Observer{obs}
	stopSide := sync.OnceFunc(func() { close(stop) })
	// The side goroutine's failure ends the waits for the jobs.
	side, failed := errgroup.WithContext(context.Background())
	var late, spanning atomic.Int64
	// spin cancels j until the slot has ended it.
	spin := func(j, next string) error {
		bound := time.NewTimer(endBound)
		defer bound.Stop()
		info, err := s.Get(j)
		if err != nil {
			return err
		}
		// Only while j runs may a Cancel reach the slot: the last
		// of these may do so as the next job begins.
		for info.State == scheduler.Running {
			select {
			case <-stop:
				return nil
			case <-bound.C:
				return fmt.Errorf("job %s still %v %v after its pair ended", j, info.State, endBound)
			default:
			}
			if err := s.Cancel(j); err != nil {
				return err
			}
			late.Add(1)
			n, err := s.Get(next)
			switch {
			case err == nil && n.State != scheduler.Queued:
				spanning.Add(1)
			case err != nil && !errors.Is(err, scheduler.ErrNotFound): // not yet submitted
				return err
			}
			if info, err = s.Get(j); err != nil {
				return err
			}
		}
		return nil
	}
	side.Go(func() error {
		for {
			var j string
			select {
			case j = <-obs.ended:
			case <-stop:
				return nil
			}
			info, err := s.Get(j)
			if err != nil {
				return err
			}
			next := name(info.Seq + 1)
			var g errgroup.Group
			for range spinners {
				g.Go(func() error { return spin(j, next) })
			}
			select {
			case obs.ack <- struct{}{}:
			case <-stop:
				return g.Wait()
			}
			if err := g.Wait(); err != nil {
				return err
			}
		}
	})
	t.Cleanup(func() { stopSide(); _ = side.Wait() }) // before Shutdown
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = submit(t, s, cfg)
	}
	for _, j := range ids {
		if _, err := s.Wait(failed, j); err != nil {
			break // side.Wait says why
		}
	}
	stopSide()
	require.NoError(t, side.Wait())
	for _, j := range ids {
		require.Equal(t, scheduler.Completed, wait(t, s, j).State, j)
	}
	t.Logf("%d Cancels of running jobs whose pair had ended, %d of them spanning the next job's start", late.Load(), spanning.Load())
	require.Positive(t, spanning.Load(), "no Cancel of a running job returned after the next job had started")
}
