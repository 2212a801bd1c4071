package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestO8_ThousandJobsExactlyOneTerminalGapFreeTimelines submits 1,000 jobs
// with scripted providers — relays and review loops, every 50th cancelled
// right after submission — and subscribes to each job's timeline as soon
// as it is submitted, mostly while the job is queued. Every job reaches
// exactly one terminal state, agreeing with its timeline's single pair
// terminal; every timeline is gap-free; the pair and model-operation
// limits held under the load.
func TestO8_ThousandJobsExactlyOneTerminalGapFreeTimelines(t *testing.T) {
	const jobs, pairs, modelOps = 1000, 8, 3
	s := newScheduler(t, scheduler.Config{Pairs: pairs, ModelOps: modelOps, Queue: jobs, Retain: jobs})
	var ops gauge
	g := &pairGauge{}
	newPair := func(p orchestrator.Pattern) *orchestrator.Config {
		cfg := relay(t, &counting{inner: cycling("Draft."), g: &ops}, &counting{inner: cycling("Fine.\nAPPROVED"), g: &ops})
		cfg.Pattern = p
		cfg.Timeline.Required = []eventlog.Observer{g}
		return cfg
	}
	configs := []*orchestrator.Config{newPair(orchestrator.Relay), newPair(orchestrator.ReviewLoop)}

	ended := make([]orchestrator.Ended, jobs) // zero for a job without a timeline
	paired := make([]bool, jobs)              // the job had a timeline
	var readers errgroup.Group
	ids := make([]string, jobs)
	for i := range jobs {
		ids[i] = submit(t, s, configs[i%2])
		if i%50 == 49 {
			require.NoError(t, s.Cancel(ids[i]))
		}
		readers.Go(func() error {
			sub, err := s.Subscribe(context.Background(), ids[i], 0)
			if errors.Is(err, scheduler.ErrNoTimeline) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", ids[i], err)
			}
			paired[i] = true
			evs, err := readTimeline(context.Background(), sub)
			if err != nil {
				return fmt.Errorf("%s: %w", ids[i], err)
			}
			ended[i], err = checkTimeline(ids[i], evs)
			return err
		})
	}
	require.NoError(t, readers.Wait())
	require.NoError(t, s.Close(context.Background()))

	var terminal [6]int
	for i, j := range ids {
		info := wait(t, s, j)
		terminal[info.State]++
		switch {
		case info.State == scheduler.Completed:
			require.NoError(t, info.Err)
			require.Equal(t, ended[i].Reason, info.Result.Reason, j)
			require.True(t, info.Result.Reason.Succeeded(), j)
		case info.State == scheduler.Cancelled && i%50 == 49:
			require.ErrorIs(t, info.Err, context.Canceled, j)
			// A job cancelled after it started but before its pair
			// leased its plan ends without a pair, so without a timeline.
			if paired[i] {
				require.Equal(t, orchestrator.ReasonCancelled, ended[i].Reason, j)
			} else {
				require.Zero(t, info.Result, j)
			}
		default:
			t.Fatalf("%s ended %s: %v", j, info.State, info.Err)
		}
		again, err := s.Get(j)
		require.NoError(t, err)
		require.Equal(t, info, again, "a terminal state never changes")
	}
	st := s.Stats()
	require.Equal(t, jobs, terminal[scheduler.Completed]+terminal[scheduler.Cancelled])
	require.Equal(t, uint64(terminal[scheduler.Completed]), st.Completed, "one terminal transition per job")
	require.Equal(t, uint64(terminal[scheduler.Cancelled]), st.Cancelled)
	require.Zero(t, st.Failed)
	require.Zero(t, st.Queued+st.Running+st.ModelOps)
	require.Equal(t, jobs, st.Retained)
	require.LessOrEqual(t, g.g.max.Load(), int64(pairs))
	require.LessOrEqual(t, ops.max.Load(), int64(modelOps))
	require.Zero(t, ops.cur.Load())
	t.Logf("completed %d, cancelled %d; at most %d pairs and %d model operations at once",
		terminal[scheduler.Completed], terminal[scheduler.Cancelled], g.g.max.Load(), ops.max.Load())
}
