package scheduler_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_FIFOUnderConcurrencyOne queues 49 jobs behind a running one with a
// pool of one: pairs start in submission order, one at a time, and each
// starts after the previous one ended.
func TestO8_FIFOUnderConcurrencyOne(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, Queue: 64, Clock: &enginetest.Clock{}})
	g, block, first, rest := gaugedBehindHeld(t)

	ids := []string{submit(t, s, first)}
	<-block.started // job-1 holds the only slot
	for range 49 {
		ids = append(ids, submit(t, s, rest))
	}
	require.Equal(t, 49, s.Stats().Queued)
	var queued []string
	for info := range s.List(scheduler.Queued) {
		queued = append(queued, info.ID)
	}
	require.Equal(t, ids[1:], queued, "List yields submission order")

	block.Release()
	require.NoError(t, s.Close(context.Background()))
	require.Equal(t, ids, g.order(), "pairs started in submission order")
	require.Equal(t, int64(1), g.g.max.Load())

	var prevEnd time.Time
	for i, info := range slices.Collect(s.List(scheduler.Completed)) {
		require.Equal(t, ids[i], info.ID)
		require.Equal(t, uint64(i+1), info.Seq)
		require.True(t, info.Started.After(prevEnd), "job %s started before its predecessor ended", info.ID)
		require.True(t, info.Ended.After(info.Started))
		prevEnd = info.Ended
	}
}

// TestO8_ConcurrentPairsLimitNeverExceeded runs 40 jobs whose model calls
// take fake time, so every free slot fills: the pairs between pair.started
// and their terminal, counted by a timeline observer, reach the limit and
// never pass it, and Stats never reports more running jobs.
func TestO8_ConcurrentPairsLimitNeverExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pairs, jobs = 4, 40
		s := newScheduler(t, scheduler.Config{Pairs: pairs, Queue: jobs})
		var ops gauge
		var running gauge // Stats().Running, sampled at every pair start
		g := &pairGauge{check: func() { running.see(int64(s.Stats().Running)) }}
		cfg := relay(t,
			&counting{inner: cycling("Draft."), g: &ops, hold: time.Millisecond},
			&counting{inner: cycling("OK."), g: &ops, hold: time.Millisecond})
		cfg.Timeline.Required = []eventlog.Observer{g}
		for range jobs {
			submit(t, s, cfg)
		}
		require.NoError(t, s.Close(context.Background()))

		require.Equal(t, int64(pairs), g.g.max.Load(), "pairs at once")
		require.Equal(t, int64(pairs), running.max.Load(), "Stats().Running at once")
		require.Equal(t, uint64(jobs), s.Stats().Completed)
		require.Len(t, g.order(), jobs)
	})
}

// TestO8_ModelOperationLimitNeverExceeded runs 48 jobs on 8 pair slots with
// 3 model slots. A provider under the scheduler's decorator counts the
// operations in flight (Stream to end of stream): the count reaches 3 and
// never passes it, while 8 pairs run at once.
func TestO8_ModelOperationLimitNeverExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pairs, modelOps, jobs = 8, 3, 48
		s := newScheduler(t, scheduler.Config{Pairs: pairs, ModelOps: modelOps, Queue: jobs})
		var ops gauge
		g := &pairGauge{}
		cfg := relay(t,
			&counting{inner: cycling("Draft."), g: &ops, hold: time.Millisecond},
			&counting{inner: cycling("OK."), g: &ops, hold: time.Millisecond})
		cfg.Timeline.Required = []eventlog.Observer{g}
		for range jobs {
			submit(t, s, cfg)
		}
		require.NoError(t, s.Close(context.Background()))

		require.Equal(t, int64(modelOps), ops.max.Load(), "model operations at once")
		require.Equal(t, int64(0), ops.cur.Load())
		require.Equal(t, int64(pairs), g.g.max.Load(), "pairs at once")
		st := s.Stats()
		require.Equal(t, uint64(jobs), st.Completed)
		require.Zero(t, st.ModelOps, "every slot given back")
		require.NotZero(t, st.ModelWaits)
	})
}

// TestO8_QueueFullIsTyped fills a queue of 3 behind a running job: the next
// Submit returns at once with a *QueueFullError, and once a job has left
// the queue there is room again.
func TestO8_QueueFullIsTyped(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, Queue: 3})
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	rest := relay(t, cycling("Draft."), cycling("OK."))
	for range 3 {
		submit(t, s, rest)
	}

	_, err := s.Submit(context.Background(), scheduler.Job{Pair: rest})
	var full *scheduler.QueueFullError
	require.ErrorAs(t, err, &full)
	require.Equal(t, 3, full.Limit)
	require.ErrorIs(t, err, scheduler.ErrQueueFull)
	st := s.Stats()
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, uint64(4), st.Submitted)
	require.Equal(t, 3, st.Queued)
	require.Equal(t, 1, st.Running)

	_, err = s.Submit(context.Background(), scheduler.Job{})
	require.ErrorIs(t, err, bound.ErrInvalid)

	block.Release()
	require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
	require.Equal(t, scheduler.Completed, wait(t, s, "job-2").State)
	submit(t, s, rest) // room again
}

// TestO8_CancelQueuedNeverStarts cancels a queued job: it ends cancelled at
// once, its pair never starts (no pair.started, no model call), it has no
// timeline, and the jobs around it run.
func TestO8_CancelQueuedNeverStarts(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	writer, reviewer := cycling("Never."), cycling("Never.")
	never := relay(t, writer, reviewer)
	g := &pairGauge{}
	never.Timeline.Required = []eventlog.Observer{g}
	j2 := submit(t, s, never)
	j3 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	require.NoError(t, s.Cancel(j2))
	info, err := s.Get(j2)
	require.NoError(t, err)
	require.Equal(t, scheduler.Cancelled, info.State)
	require.True(t, info.Started.IsZero())
	require.False(t, info.Ended.IsZero())
	require.ErrorIs(t, info.Err, scheduler.ErrCancelled)
	require.ErrorIs(t, info.Err, orchestrator.ErrCancelled)
	require.ErrorIs(t, info.Err, context.Canceled)
	_, err = s.Subscribe(context.Background(), j2, 0)
	require.ErrorIs(t, err, scheduler.ErrNoTimeline)

	block.Release()
	require.NoError(t, s.Close(context.Background()))
	require.Zero(t, writer.Calls()+reviewer.Calls(), "the cancelled job's models were never called")
	require.Empty(t, g.order(), "the cancelled job's pair never started")
	require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
	require.Equal(t, scheduler.Completed, wait(t, s, j3).State)

	require.NoError(t, s.Cancel(j2), "cancelling an ended job does nothing")
	again, err := s.Get(j2)
	require.NoError(t, err)
	require.Equal(t, info, again)
	require.ErrorIs(t, s.Cancel("job-99"), scheduler.ErrNotFound)
	st := s.Stats()
	require.Equal(t, uint64(1), st.Cancelled)
	require.Equal(t, uint64(2), st.Completed)
}

// TestO8_CancelRunningEndsCancelled cancels a job whose writer is in a model
// operation: the pair is cancelled (O6), the second worker never runs, and
// the job and its timeline end cancelled.
func TestO8_CancelRunningEndsCancelled(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 2, ModelOps: 2})
	block := newHeld("Never answered.")
	reviewer := cycling("OK.")
	j := submit(t, s, relay(t, block, reviewer))
	<-block.started
	sub, err := s.Subscribe(context.Background(), j, 0)
	require.NoError(t, err)
	info, err := s.Get(j)
	require.NoError(t, err)
	require.Equal(t, scheduler.Running, info.State)

	require.NoError(t, s.Cancel(j))
	info = wait(t, s, j)
	require.Equal(t, scheduler.Cancelled, info.State)
	require.Equal(t, orchestrator.ReasonCancelled, info.Result.Reason)
	require.ErrorIs(t, info.Err, orchestrator.ErrCancelled)
	require.False(t, info.Started.IsZero())
	require.Zero(t, reviewer.Calls())

	evs, err := readTimeline(context.Background(), sub)
	require.NoError(t, err)
	end, err := checkTimeline(j, evs)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCancelled, end.Reason)
	require.Equal(t, orchestrator.KindCancelled, evs[len(evs)-1].Kind())
	require.Equal(t, info.Result.LastSeq, evs[len(evs)-1].Seq())
	require.Zero(t, s.Stats().ModelOps)
}

// TestO8_WaitWithCancelledContext waits on a running and on a queued job
// with done contexts: Wait returns the context's error at once and the jobs
// carry on; once a job has ended, Wait returns it whatever the context.
func TestO8_WaitWithCancelledContext(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, j := range []string{j1, j2} {
		info, err := s.Wait(cancelled, j)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, info)
		info, err = s.Wait(expired, j)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Zero(t, info)
	}
	one, _ := s.Get(j1)
	two, _ := s.Get(j2)
	require.Equal(t, scheduler.Running, one.State)
	require.Equal(t, scheduler.Queued, two.State)

	block.Release()
	require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
	require.Equal(t, scheduler.Completed, wait(t, s, j2).State)
	info, err := s.Wait(cancelled, j2)
	require.NoError(t, err, "an ended job is returned even to a done context")
	require.Equal(t, scheduler.Completed, info.State)
	_, err = s.Wait(context.Background(), "job-99")
	require.ErrorIs(t, err, scheduler.ErrNotFound)
}

// TestO8_CloseDrains closes a scheduler with 2 jobs running and 18 queued:
// Close refuses new jobs at once, returns only after every job has
// completed, and leaves no goroutine behind.
func TestO8_CloseDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(t, scheduler.Config{Pairs: 2})
		block := newHeld("First.")
		held := relay(t, block, cycling("OK."))
		rest := relay(t, cycling("Draft."), cycling("OK."))
		var ids []string
		for i := range 20 {
			cfg := rest
			if i < 2 {
				cfg = held
			}
			ids = append(ids, submit(t, s, cfg))
		}
		closed := make(chan error, 1)
		go func() { closed <- s.Close(context.Background()) }()
		synctest.Wait() // every goroutine of the bubble is blocked
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v before the jobs ended", err)
		default:
		}
		_, err := s.Submit(context.Background(), scheduler.Job{Pair: rest})
		require.ErrorIs(t, err, scheduler.ErrClosed)
		st := s.Stats()
		require.Equal(t, 2, st.Running)
		require.Equal(t, 18, st.Queued)

		block.Release()
		require.NoError(t, <-closed)
		for _, j := range ids {
			require.Equal(t, scheduler.Completed, wait(t, s, j).State)
		}
	})
	goleak.VerifyNone(t)
}

// TestO8_ShutdownCancels shuts down a scheduler with 2 jobs running and 8
// queued: the running pairs end cancelled, the queued jobs end cancelled
// without starting, and no goroutine is left.
func TestO8_ShutdownCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(t, scheduler.Config{Pairs: 2, ModelOps: 1})
		block := newHeld("Never answered.")
		g := &pairGauge{}
		reviewer := cycling("OK.")
		cfg := relay(t, block, reviewer)
		cfg.Timeline.Required = []eventlog.Observer{g}
		var ids []string
		for range 10 {
			ids = append(ids, submit(t, s, cfg))
		}
		synctest.Wait() // two pairs are in (or waiting for) a model operation

		require.NoError(t, s.Shutdown(context.Background()))
		for i, j := range ids {
			info := wait(t, s, j)
			require.Equal(t, scheduler.Cancelled, info.State, j)
			require.ErrorIs(t, info.Err, context.Canceled)
			if i < 2 {
				require.Equal(t, orchestrator.ReasonCancelled, info.Result.Reason)
			} else {
				require.True(t, info.Started.IsZero(), "%s never started", j)
				require.ErrorIs(t, info.Err, scheduler.ErrCancelled)
			}
		}
		require.ElementsMatch(t, ids[:2], g.order(), "only the two running pairs started")
		require.Zero(t, g.g.cur.Load())
		require.Zero(t, reviewer.Calls())
		st := s.Stats()
		require.Equal(t, uint64(10), st.Cancelled)
		require.Zero(t, st.ModelOps)
		_, err := s.Submit(context.Background(), scheduler.Job{Pair: cfg})
		require.ErrorIs(t, err, scheduler.ErrClosed)
	})
	goleak.VerifyNone(t)
}
