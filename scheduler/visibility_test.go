package scheduler_test

import (
	"context"
	"slices"
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

// TestO8_StartIsVisibleToEveryRead: once a job has started (its
// slot holds it), every read sees it running: Get, then
// List by state and List of every job in submission order.
func TestO8_StartIsVisibleToEveryRead(t *testing.T) {
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

// TestO8_ListByStateFollowsMixedTransitions: after jobs have been
// cancelled while queued, failed, completed, started and forgotten
// (Retain), List of each state yields exactly the jobs in it, in
// submission order, and List of every job all of them.
func TestO8_ListByStateFollowsMixedTransitions(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, Retain: 5})
	first, sixth := newHeld("First."), newHeld("Sixth.")
	refused := relay(t, cycling("Draft."), cycling("OK."))
	refused.Plans = nil
	ok := relay(t, cycling("Draft."), cycling("OK."))

	submit(t, s, relay(t, first, cycling("OK."))) // job-1: runs, completes
	<-first.started
	submit(t, s, ok)                              // job-2: cancelled while queued
	submit(t, s, refused)                         // job-3: fails
	submit(t, s, ok)                              // job-4: completes
	submit(t, s, ok)                              // job-5: cancelled while queued
	submit(t, s, relay(t, sixth, cycling("OK."))) // job-6: runs, held
	require.NoError(t, s.Cancel("job-2"))
	require.NoError(t, s.Cancel("job-5"))
	require.Equal(t, []string{"job-3", "job-4", "job-6"}, listIDs(s, scheduler.Queued))
	require.Equal(t, []string{"job-2", "job-5"}, listIDs(s, scheduler.Cancelled))

	first.Release()
	<-sixth.started
	submit(t, s, ok) // job-7: queued behind job-6
	require.Equal(t, []string{"job-1", "job-4"}, listIDs(s, scheduler.Completed))
	require.Equal(t, []string{"job-3"}, listIDs(s, scheduler.Failed))
	require.Equal(t, []string{"job-2", "job-5"}, listIDs(s, scheduler.Cancelled))
	require.Equal(t, []string{"job-6"}, listIDs(s, scheduler.Running))
	require.Equal(t, []string{"job-7"}, listIDs(s, scheduler.Queued))
	require.Equal(t, []string{"job-1", "job-2", "job-3", "job-4", "job-5", "job-6", "job-7"}, listIDs(s, 0))

	// Seven finished with Retain 5: job-2 and job-5, which finished
	// first, are forgotten.
	sixth.Release()
	wait(t, s, "job-7")
	require.Equal(t, []string{"job-1", "job-4", "job-6", "job-7"}, listIDs(s, scheduler.Completed))
	require.Equal(t, []string{"job-3"}, listIDs(s, scheduler.Failed))
	require.Empty(t, listIDs(s, scheduler.Cancelled))
	require.Empty(t, listIDs(s, scheduler.Running))
	require.Empty(t, listIDs(s, scheduler.Queued))
	require.Equal(t, []string{"job-1", "job-3", "job-4", "job-6", "job-7"}, listIDs(s, 0))
}
