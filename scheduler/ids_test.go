package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/spice-orch/spice-orch/scheduler"
)

// newDefaultIDs is newScheduler with the default ID source, whose IDs the
// table reads back as submission numbers.
func newDefaultIDs(t testing.TB, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s
}

// TestO8_DefaultIDsNameOnlyTheirJob: a default ID finds its job; the same
// number spelled otherwise, another scheduler's prefix or a number no job
// has finds nothing, in every method that takes an ID.
func TestO8_DefaultIDsNameOnlyTheirJob(t *testing.T) {
	s := newDefaultIDs(t, scheduler.Config{Pairs: 1})
	j := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
	require.Equal(t, scheduler.Completed, wait(t, s, j).State)
	cut := strings.LastIndexByte(j, '-') + 1
	prefix, digits := j[:cut], j[cut:]
	require.Equal(t, "1", digits)

	info, err := s.Get(j)
	require.NoError(t, err)
	require.Equal(t, j, info.ID)
	for _, other := range []string{
		prefix + "01", prefix + "+1", prefix + "0", prefix + "2", prefix,
		prefix + "18446744073709551616", prefix + "99999999999999999999999", prefix + "1x",
		"job-00000000-1", strings.ToUpper(prefix) + "1", "",
	} {
		_, err := s.Get(other)
		require.ErrorIs(t, err, scheduler.ErrNotFound, "%q", other)
		_, err = s.Wait(context.Background(), other)
		require.ErrorIs(t, err, scheduler.ErrNotFound, "%q", other)
		require.ErrorIs(t, s.Cancel(other), scheduler.ErrNotFound, "%q", other)
		_, err = s.Subscribe(context.Background(), other, 0)
		require.ErrorIs(t, err, scheduler.ErrNotFound, "%q", other)
	}
}

// TestO8_DefaultIDsUnderCancelAndList runs the scenario of
// TestO8_WaitManyShortJobsUnderCancelAndList with the default IDs (the
// contract tests name their jobs): more jobs than the submission buffer
// holds, so many are stored queued, every third cancelled, while Lists
// run. Every Wait returns the job's single terminal state.
func TestO8_DefaultIDsUnderCancelAndList(t *testing.T) {
	for _, retain := range []int{600, 7} {
		t.Run(fmt.Sprintf("retain=%d", retain), func(t *testing.T) {
			const jobs = 600
			s := newDefaultIDs(t, scheduler.Config{Pairs: 3, Queue: jobs, Retain: retain})
			cfg := relay(t, cycling("Draft."), cycling("OK."))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ids := make([]string, jobs)
			var g errgroup.Group
			listed := make(chan error, 1)
			done := make(chan struct{})
			go func() {
				for n := 0; ; n++ {
					select {
					case <-done:
						listed <- nil
						return
					default:
					}
					if err := checkList(s, retain, scheduler.State(n%6)); err != nil {
						listed <- err
						return
					}
				}
			}()
			for i := range jobs {
				ids[i] = submit(t, s, cfg)
				if i%3 == 2 {
					if err := s.Cancel(ids[i]); err != nil && !errors.Is(err, scheduler.ErrNotFound) {
						require.NoError(t, err)
					}
				}
				g.Go(func() error {
					info, err := s.Wait(ctx, ids[i])
					switch {
					case errors.Is(err, scheduler.ErrNotFound) && retain < jobs:
						return nil
					case err != nil:
						return fmt.Errorf("wait %s: %w", ids[i], err)
					case !info.State.Terminal():
						return fmt.Errorf("wait %s: %s", ids[i], info.State)
					case i%3 != 2 && info.State != scheduler.Completed:
						return fmt.Errorf("wait %s: %s", ids[i], info.State)
					}
					return nil
				})
			}
			require.NoError(t, g.Wait())
			close(done)
			require.NoError(t, <-listed)
			require.NoError(t, s.Close(ctx))
			st := s.Stats()
			require.Equal(t, uint64(jobs), st.Completed+st.Cancelled)
			require.Equal(t, min(jobs, retain), st.Retained)
			require.NoError(t, checkList(s, retain, 0))
			kept := slices.Collect(s.List(0))
			require.Len(t, kept, min(jobs, retain))
			for _, info := range kept {
				got, err := s.Get(info.ID)
				require.NoError(t, err)
				require.Equal(t, info, got)
			}
		})
	}
}

// TestO8_CancelledQueuedJobsArePassedOver: with the only slot held, jobs are
// stored queued and most of them cancelled; the rest then start in
// submission order, and none of the cancelled ones starts.
func TestO8_CancelledQueuedJobsArePassedOver(t *testing.T) {
	s := newDefaultIDs(t, scheduler.Config{Pairs: 1, Queue: 400})
	g, block, first, rest := gaugedBehindHeld(t)
	ids := []string{submit(t, s, first)}
	<-block.started
	for range 300 {
		ids = append(ids, submit(t, s, rest))
	}
	want := ids[:1]
	for i, j := range ids[1:] {
		if i%10 == 9 {
			want = append(want, j)
			continue
		}
		require.NoError(t, s.Cancel(j))
	}
	block.Release()
	require.NoError(t, s.Close(context.Background()))
	require.Equal(t, want, g.order())
	st := s.Stats()
	require.Equal(t, uint64(len(want)), st.Completed)
	require.Equal(t, uint64(len(ids)-len(want)), st.Cancelled)
}
