package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_WaitManyShortJobsUnderCancelAndList: many short jobs, each with
// its own Wait started at submission, while other goroutines cancel every
// third job, Get each one and List all of them. Every Wait returns (within
// a bound, never a hang) the job's single terminal state, which Get
// reports unchanged after Close; a List never shows a job twice, out of
// submission order, or more finished jobs than Config.Retain. With a small
// Retain a Wait may find its job already forgotten (ErrNotFound).
func TestO8_WaitManyShortJobsUnderCancelAndList(t *testing.T) {
	for _, retain := range []int{400, 7} {
		t.Run(fmt.Sprintf("retain=%d", retain), func(t *testing.T) {
			const jobs = 400
			s := newScheduler(t, scheduler.Config{Pairs: 4, Queue: jobs, Retain: retain})
			cfg := relay(t, cycling("Draft."), cycling("OK."))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			ids := make([]string, jobs)
			infos := make([]scheduler.Info, jobs)
			forgotten := make([]bool, jobs)
			toCancel := make(chan string, jobs)
			done := make(chan struct{})
			var g, side errgroup.Group
			side.Go(func() error {
				for jobID := range toCancel {
					if err := s.Cancel(jobID); err != nil && !errors.Is(err, scheduler.ErrNotFound) {
						return fmt.Errorf("cancel %s: %w", jobID, err)
					}
				}
				return nil
			})
			side.Go(func() error {
				for n := 0; ; n++ {
					select {
					case <-done:
						return nil
					default:
					}
					if err := checkList(s, retain, scheduler.State(n%6)); err != nil {
						return err
					}
				}
			})
			for i := range jobs {
				ids[i] = submit(t, s, cfg)
				if i%3 == 2 {
					toCancel <- ids[i]
				}
				g.Go(func() error {
					info, err := s.Wait(ctx, ids[i])
					switch {
					case errors.Is(err, scheduler.ErrNotFound) && retain < jobs:
						forgotten[i] = true
						return nil
					case err != nil:
						return fmt.Errorf("wait %s: %w", ids[i], err)
					case !info.State.Terminal():
						return fmt.Errorf("wait %s: %s", ids[i], info.State)
					}
					infos[i] = info
					if _, err := s.Get(ids[i]); err != nil && !(errors.Is(err, scheduler.ErrNotFound) && retain < jobs) {
						return fmt.Errorf("get %s: %w", ids[i], err)
					}
					return nil
				})
			}
			close(toCancel)
			require.NoError(t, g.Wait())
			close(done)
			require.NoError(t, side.Wait())
			require.NoError(t, s.Close(ctx))

			var ended, kept int
			for i, jobID := range ids {
				if forgotten[i] {
					continue
				}
				ended++
				got, err := s.Get(jobID)
				if errors.Is(err, scheduler.ErrNotFound) && retain < jobs {
					continue
				}
				require.NoError(t, err)
				kept++
				require.Equal(t, infos[i], got, "a terminal state never changes")
				if i%3 != 2 {
					require.Equal(t, scheduler.Completed, got.State, jobID)
				}
			}
			st := s.Stats()
			require.Equal(t, uint64(jobs), st.Completed+st.Cancelled+st.Failed, "one terminal per job")
			require.Zero(t, st.Failed)
			require.Zero(t, st.Queued+st.Running)
			require.Equal(t, min(jobs, retain), st.Retained)
			require.LessOrEqual(t, kept, retain)
			require.NoError(t, checkList(s, retain, 0))
			if retain >= jobs {
				require.Equal(t, jobs, ended)
			}
		})
	}
}

// checkList lists the jobs in state (every job for 0): each once, in
// submission order, in the state asked for, with at most retain finished.
func checkList(s *scheduler.Scheduler, retain int, state scheduler.State) error {
	var last uint64
	finished := 0
	seen := map[string]bool{}
	for info := range s.List(state) {
		switch {
		case seen[info.ID]:
			return fmt.Errorf("list %s: %s twice", state, info.ID)
		case info.Seq <= last:
			return fmt.Errorf("list %s: %s (seq %d) after seq %d", state, info.ID, info.Seq, last)
		case state != 0 && info.State != state:
			return fmt.Errorf("list %s: %s is %s", state, info.ID, info.State)
		}
		seen[info.ID], last = true, info.Seq
		if info.State.Terminal() {
			finished++
		}
	}
	if finished > retain {
		return fmt.Errorf("list %s: %d finished jobs kept, Retain %d", state, finished, retain)
	}
	return nil
}
