package scheduler_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/scheduler"
)

// listIDs collects the IDs List yields.
func listIDs(s *scheduler.Scheduler, state scheduler.State) []string {
	var out []string
	for info := range s.List(state) {
		out = append(out, info.ID)
	}
	return out
}

// TestO8_StartWrittenBehindIsVisible: a job's start is stored late (with
// its end), yet every read sees the job running from its start: Get, then
// List by state and List of every job in submission order.
func TestO8_StartWrittenBehindIsVisible(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	info, err := s.Get(j1)
	require.NoError(t, err)
	require.Equal(t, scheduler.Running, info.State)
	require.False(t, info.Started.IsZero())
	require.Equal(t, []string{j1}, listIDs(s, scheduler.Running))
	require.Equal(t, []string{j2}, listIDs(s, scheduler.Queued))
	require.Equal(t, []string{j1, j2}, listIDs(s, 0))

	block.Release()
	require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
	require.Equal(t, scheduler.Completed, wait(t, s, j2).State)
	require.Equal(t, []string{j1, j2}, listIDs(s, scheduler.Completed))
	require.Equal(t, []string{j1, j2}, listIDs(s, 0))
}

// TestO8_ShutdownCancelsStartedJobAsRunning: Shutdown, the first call to
// read the table after a start, cancels the started job's pair, not the
// job as if it were still queued; the queued one never starts.
func TestO8_ShutdownCancelsStartedJobAsRunning(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("First.")
	j1 := submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	require.NoError(t, s.Shutdown(context.Background()))
	one := wait(t, s, j1)
	require.Equal(t, scheduler.Cancelled, one.State)
	require.False(t, one.Started.IsZero(), "the job ran")
	require.NotEqual(t, scheduler.ErrCancelled, one.Err, "cancelled by its pair, not in the queue")
	two := wait(t, s, j2)
	require.Equal(t, scheduler.Cancelled, two.State)
	require.True(t, two.Started.IsZero())
	require.Equal(t, scheduler.ErrCancelled, two.Err)
	require.True(t, slices.Equal([]string{j1, j2}, listIDs(s, scheduler.Cancelled)))
	st := s.Stats()
	require.Equal(t, uint64(2), st.Cancelled, "each job ended once")
	require.Zero(t, st.Queued)
	require.Zero(t, st.Running)
}

// TestO8_SubscribeWaitingSeesStartAtOnce: a Subscribe already waiting on a
// queued job returns when the job starts, while its pair still runs: a
// start is not written behind while a Subscribe may wait for it.
func TestO8_SubscribeWaitingSeesStartAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(t, scheduler.Config{Pairs: 1})
		first := newHeld("First.")
		submit(t, s, relay(t, first, cycling("OK.")))
		<-first.started
		second := newHeld("Draft.")
		j2 := submit(t, s, relay(t, second, cycling("OK.")))

		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		got := make(chan error, 1)
		go func() {
			sub, err := s.Subscribe(ctx, j2, 0)
			if err == nil {
				sub.Close()
			}
			got <- err
		}()
		synctest.Wait() // Subscribe waits on the queued job
		first.Release()
		<-second.started // j2 runs, held in its first model operation
		require.NoError(t, <-got, "Subscribe returned before the pair ended (fake time would pass the hour)")
		second.Release()
		require.Equal(t, scheduler.Completed, wait(t, s, j2).State)
	})
}

// TestO8_WaitOnCancelledPendingJobReturns: Cancel stores a pending job's
// end and wakes its waiters in the same commit that stores the job; a
// Wait that reads the job from the submission buffer after that wake but
// before the buffer lets go of it must still be woken, not wait forever.
func TestO8_WaitOnCancelledPendingJobReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			s     *scheduler.Scheduler
			j2    string
			armed atomic.Bool
			got   = make(chan scheduler.Info, 1)
			fail  = make(chan error, 1)
		)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		scheduler.SetDrainedHook(t, func() {
			if !armed.CompareAndSwap(true, false) {
				return
			}
			go func() {
				info, err := s.Wait(ctx, j2)
				if err != nil {
					fail <- err
					return
				}
				got <- info
			}()
			synctest.Wait() // Wait has read j2 from the buffer and blocks
		})
		s = newScheduler(t, scheduler.Config{Pairs: 1})
		first := newHeld("First.")
		j1 := submit(t, s, relay(t, first, cycling("OK.")))
		<-first.started // the only slot is busy: j2 stays pending
		j2 = submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

		armed.Store(true)
		require.NoError(t, s.Cancel(j2))
		select {
		case info := <-got:
			require.Equal(t, scheduler.Cancelled, info.State)
		case err := <-fail:
			t.Fatalf("Wait on the cancelled job: %v (it was never woken; fake time passed the hour)", err)
		}
		first.Release()
		require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
	})
}

// TestO8_DrainedJobNeverReadsQueuedAfterItsEnd: a drain's commit releases
// the table before its jobs leave the submission buffer, so other
// transactions can start, end or cancel a drained job first. Reads must
// then see that end, not the job's Queued record still in the buffer.
func TestO8_DrainedJobNeverReadsQueuedAfterItsEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state scheduler.State
		end   func(t *testing.T, s *scheduler.Scheduler, first *held, jobID string)
	}{
		{"started and completed", scheduler.Completed, func(t *testing.T, s *scheduler.Scheduler, first *held, _ string) {
			first.Release() // the slot takes the stored job and runs it
		}},
		{"cancelled", scheduler.Cancelled, func(t *testing.T, s *scheduler.Scheduler, _ *held, jobID string) {
			require.NoError(t, s.Cancel(jobID))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var (
					s     *scheduler.Scheduler
					first = newHeld("First.")
					j2    string
					armed atomic.Bool
				)
				scheduler.SetDrainedHook(t, func() {
					if !armed.CompareAndSwap(true, false) {
						return
					}
					// j2 is stored, still in the buffer: end it now.
					tc.end(t, s, first, j2)
					synctest.Wait() // the pool is idle again
					info, err := s.Get(j2)
					require.NoError(t, err)
					require.Equal(t, tc.state, info.State, "Get after the job's end")
				})
				s = newScheduler(t, scheduler.Config{Pairs: 1})
				j1 := submit(t, s, relay(t, first, cycling("OK.")))
				<-first.started // the only slot is busy: j2 stays pending
				j2 = submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
				armed.Store(true)
				require.Equal(t, []string{j1, j2}, listIDs(s, 0)) // List drains j2
				require.False(t, armed.Load(), "the hook ran")
				first.Release()
				require.Equal(t, tc.state, wait(t, s, j2).State)
				require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
			})
		})
	}
}
