package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestNewValidatesConfig: every bad limit is a *bound.Error naming its
// field.
func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   scheduler.Config
		field string
	}{
		{scheduler.Config{Pairs: -1}, "scheduler.pairs"},
		{scheduler.Config{Pairs: scheduler.MaxPairs + 1}, "scheduler.pairs"},
		{scheduler.Config{ModelOps: -1}, "scheduler.model_ops"},
		{scheduler.Config{ModelOps: scheduler.MaxModelOps + 1}, "scheduler.model_ops"},
		{scheduler.Config{ModelOps: 1, ModelWait: -time.Second}, "scheduler.model_wait"},
		{scheduler.Config{ModelOps: 1, ModelWait: 2 * time.Hour}, "scheduler.model_wait"},
		{scheduler.Config{ModelWait: time.Second}, "scheduler.model_wait"},
		{scheduler.Config{Queue: -1}, "scheduler.queue"},
		{scheduler.Config{Queue: scheduler.MaxQueue + 1}, "scheduler.queue"},
		{scheduler.Config{Retain: -1}, "scheduler.retain"},
		{scheduler.Config{Retain: scheduler.MaxRetain + 1}, "scheduler.retain"},
	} {
		s, err := scheduler.New(tc.cfg)
		require.Nil(t, s)
		var be *bound.Error
		require.ErrorAs(t, err, &be, tc.field)
		require.Equal(t, tc.field, be.Field)
	}
}

// TestDefaultIDsAreUnique: the default ID source gives valid IDs that
// differ between schedulers.
func TestDefaultIDsAreUnique(t *testing.T) {
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	seen := map[string]bool{}
	for range 2 {
		s, err := scheduler.New(scheduler.Config{Pairs: 1})
		require.NoError(t, err)
		for range 3 {
			j, err := s.Submit(context.Background(), scheduler.Job{Pair: cfg})
			require.NoError(t, err)
			require.False(t, seen[j], j)
			seen[j] = true
		}
		require.NoError(t, s.Close(context.Background()))
	}
}

// TestIDSourceIsChecked: an ID source that repeats itself, returns an
// invalid ID or panics gets a typed error and queues nothing.
func TestIDSourceIsChecked(t *testing.T) {
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	for name, ids := range map[string]func(uint64) string{
		"repeat":  func(uint64) string { return "same" },
		"invalid": func(n uint64) string { return map[bool]string{true: "ok", false: "not an id"}[n == 1] },
		"panic": func(n uint64) string {
			if n > 1 {
				panic("boom")
			}
			return "ok"
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScheduler(t, scheduler.Config{Pairs: 1, IDs: ids})
			submit(t, s, cfg)
			_, err := s.Submit(context.Background(), scheduler.Job{Pair: cfg})
			require.Error(t, err)
			if name != "panic" {
				require.ErrorIs(t, err, bound.ErrInvalid)
			}
			require.Equal(t, uint64(1), s.Stats().Submitted)
		})
	}
}

// TestClockPanicIsContained: a panicking clock costs the timestamps, not the
// job.
func TestClockPanicIsContained(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1,
		Clock: engine.ClockFunc(func() time.Time { panic("clock") })})
	j := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
	info := wait(t, s, j)
	require.Equal(t, scheduler.Completed, info.State)
	require.True(t, info.Submitted.IsZero())
}

// TestSubscribeQueuedWaitsForStart: Subscribe on a queued job waits until
// the job starts, honours its context while it waits, and then delivers the
// whole timeline.
func TestSubscribeQueuedWaitsForStart(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	block := newHeld("First.")
	submit(t, s, relay(t, block, cycling("OK.")))
	<-block.started
	j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Subscribe(ctx, j2, 0)
	require.ErrorIs(t, err, context.Canceled)

	type result struct {
		sub *eventlog.Subscription
		err error
	}
	got := make(chan result, 1)
	go func() {
		sub, err := s.Subscribe(context.Background(), j2, 0)
		got <- result{sub, err}
	}()
	info, _ := s.Get(j2)
	require.Equal(t, scheduler.Queued, info.State)
	block.Release()
	r := <-got
	require.NoError(t, r.err)
	evs, err := readTimeline(context.Background(), r.sub)
	require.NoError(t, err)
	end, err := checkTimeline(j2, evs)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, end.Reason)

	_, err = s.Subscribe(context.Background(), "job-99", 0)
	require.ErrorIs(t, err, scheduler.ErrNotFound)
	// A finished job's timeline stays readable from any cursor.
	sub, err := s.Subscribe(context.Background(), j2, uint64(len(evs)-1))
	require.NoError(t, err)
	tail, err := readTimeline(context.Background(), sub)
	require.NoError(t, err)
	require.Len(t, tail, 1)
}

// TestRefusedPairConfigFails: a config the orchestrator refuses ends the
// job failed with the orchestrator's typed error, and without a timeline.
func TestRefusedPairConfigFails(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	cfg.Plans = nil
	j := submit(t, s, cfg)
	info := wait(t, s, j)
	require.Equal(t, scheduler.Failed, info.State)
	require.ErrorIs(t, info.Err, bound.ErrInvalid)
	_, err := s.Subscribe(context.Background(), j, 0)
	require.ErrorIs(t, err, scheduler.ErrNoTimeline)
	require.Equal(t, uint64(1), s.Stats().Failed)
}

// TestPairIDIsKept: a config with its own pair ID keeps it; the job ID
// names only the job.
func TestPairIDIsKept(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	cfg.ID = "pair-7"
	j := submit(t, s, cfg)
	wait(t, s, j)
	sub, err := s.Subscribe(context.Background(), j, 0)
	require.NoError(t, err)
	evs, err := readTimeline(context.Background(), sub)
	require.NoError(t, err)
	_, err = checkTimeline("pair-7", evs)
	require.NoError(t, err)
	require.Equal(t, "pair-7", cfg.ID, "the scheduler never writes to the config")
}

// TestRetainForgetsOldestFinished: with Retain 2, the jobs that finished
// first are forgotten as later ones finish.
func TestRetainForgetsOldestFinished(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, Retain: 2})
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	var ids []string
	for range 5 {
		j := submit(t, s, cfg)
		wait(t, s, j)
		ids = append(ids, j)
	}
	for _, j := range ids[:3] {
		_, err := s.Get(j)
		require.ErrorIs(t, err, scheduler.ErrNotFound, j)
	}
	for _, j := range ids[3:] {
		_, err := s.Get(j)
		require.NoError(t, err, j)
	}
	var kept []string
	for info := range s.List(0) {
		kept = append(kept, info.ID)
	}
	require.Equal(t, ids[3:], kept)
	require.Equal(t, 2, s.Stats().Retained)
}

// TestModelWaitIsBounded: with one model slot held, another operation gives
// up after ModelWait with a retryable provider error, and its job fails.
func TestModelWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScheduler(t, scheduler.Config{Pairs: 2, ModelOps: 1, ModelWait: time.Second})
		block := newHeld("First.")
		j1 := submit(t, s, relay(t, block, cycling("OK.")))
		<-block.started
		j2 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
		info := wait(t, s, j2) // fake time passes ModelWait
		require.Equal(t, scheduler.Failed, info.State)
		require.Equal(t, orchestrator.ReasonWorkerFailed, info.Result.Reason)
		var pe *model.ProviderError
		require.True(t, errors.As(info.Err, &pe), "%v", info.Err)
		require.Equal(t, scheduler.CodeModelBusy, pe.Problem().Code())
		require.True(t, pe.Retryable())
		block.Release()
		require.Equal(t, scheduler.Completed, wait(t, s, j1).State)
		require.Equal(t, uint64(1), s.Stats().ModelWaits)
	})
}

// TestCloseDeadlineThenShutdown: Close bounded by an expired context
// returns its error and leaves the jobs running; Shutdown then ends them.
func TestCloseDeadlineThenShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := scheduler.New(scheduler.Config{Pairs: 1, IDs: scheduler.Sequential("job-")})
		require.NoError(t, err)
		block := newHeld("First.")
		j := submit(t, s, relay(t, block, cycling("OK.")))
		<-block.started
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.ErrorIs(t, s.Close(ctx), context.DeadlineExceeded)
		info, _ := s.Get(j)
		require.Equal(t, scheduler.Running, info.State)
		require.NoError(t, s.Shutdown(context.Background()))
		require.Equal(t, scheduler.Cancelled, wait(t, s, j).State)
		require.NoError(t, s.Close(context.Background()), "Close after Shutdown")
	})
}

// TestSubmittedJobIsVisibleAtOnce: four goroutines submit 200 jobs each
// with the default ID source while two pairs run; every job is found by
// Get and Cancel right after Submit returns, every ID is distinct, and
// List sees every job.
func TestSubmittedJobIsVisibleAtOnce(t *testing.T) {
	s, err := scheduler.New(scheduler.Config{Pairs: 2, Queue: 1000, Retain: 1000})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Shutdown(context.Background())) }()
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	var g errgroup.Group
	ids := make([][]string, 4)
	for w := range ids {
		g.Go(func() error {
			for i := range 200 {
				j, err := s.Submit(context.Background(), scheduler.Job{Pair: cfg})
				if err != nil {
					return err
				}
				if _, err := s.Get(j); err != nil {
					return fmt.Errorf("Get %s: %w", j, err)
				}
				if i%20 == 0 {
					if err := s.Cancel(j); err != nil {
						return fmt.Errorf("Cancel %s: %w", j, err)
					}
				}
				ids[w] = append(ids[w], j)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	seen := map[string]bool{}
	for _, list := range ids {
		for _, j := range list {
			require.False(t, seen[j], "duplicate ID %s", j)
			seen[j] = true
		}
	}
	n := 0
	var last uint64
	for info := range s.List(0) {
		require.True(t, seen[info.ID])
		require.Greater(t, info.Seq, last, "List yields submission order")
		last = info.Seq
		n++
	}
	require.Equal(t, 800, n)
}

// TestRetainKeepsTheLatestFinished: with Retain 16, each job that
// finishes past the 16th makes the scheduler forget the oldest finished
// one, so exactly the latest 16 stay, in submission order.
func TestRetainKeepsTheLatestFinished(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, Retain: 16})
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	var ids []string
	for i := range 40 {
		j := submit(t, s, cfg)
		wait(t, s, j)
		ids = append(ids, j)
		kept := min(i+1, 16)
		require.Equal(t, kept, s.Stats().Retained)
		var listed []string
		for info := range s.List(0) {
			listed = append(listed, info.ID)
		}
		require.Equal(t, ids[len(ids)-kept:], listed)
	}
}

type panicking struct{}

func (panicking) Stream(context.Context, model.Request) (model.Stream, error) { panic("provider") }

// TestProviderPanicGivesSlotBack: a provider that panics under the
// decorator fails its job (the engine contains the panic) and gives its
// model slot back, so the next job runs.
func TestProviderPanicGivesSlotBack(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1, ModelOps: 1})
	bad := submit(t, s, relay(t, panicking{}, cycling("OK.")))
	good := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
	info := wait(t, s, bad)
	require.Equal(t, scheduler.Failed, info.State)
	require.Equal(t, orchestrator.ReasonWorkerFailed, info.Result.Reason)
	require.Equal(t, scheduler.Completed, wait(t, s, good).State)
	require.Zero(t, s.Stats().ModelOps)
}

// TestHostStartedHookRunsAfterTheSchedulers: a job's own Config.Started is
// still called, once, with the job's pair, after the scheduler has made
// the pair available, so a host may Subscribe to its job from the hook;
// the shared config is not changed. A host hook that panics fails only its
// own job, with one pair terminal, and the slot goes on with the next job.
func TestHostStartedHookRunsAfterTheSchedulers(t *testing.T) {
	s := newScheduler(t, scheduler.Config{Pairs: 1})
	cfg := relay(t, cycling("Draft."), cycling("OK."))
	seen := make(chan string, 1)
	var jobID string
	ready := make(chan struct{})
	cfg.Started = func(p *orchestrator.Pair) {
		<-ready // jobID is set
		sub, err := s.Subscribe(context.Background(), jobID, 0)
		if err != nil {
			seen <- "subscribe: " + err.Error()
			return
		}
		sub.Close()
		seen <- p.ID()
	}
	jobID = submit(t, s, cfg)
	close(ready)
	info := wait(t, s, jobID)
	require.Equal(t, scheduler.Completed, info.State)
	select { // the hook runs before the pair's first run, so before Wait returns
	case got := <-seen:
		require.Equal(t, jobID, got, "the hook got the job's own pair and could subscribe to it")
	default:
		t.Fatal("the host's Started hook was not called")
	}
	require.Empty(t, cfg.ID, "the shared config is not changed")

	bad := relay(t, cycling("Draft."), cycling("OK."))
	bad.Started = func(*orchestrator.Pair) { panic("host bug") }
	j2 := submit(t, s, bad)
	j3 := submit(t, s, relay(t, cycling("Draft."), cycling("OK.")))
	info = wait(t, s, j2)
	require.Equal(t, scheduler.Failed, info.State)
	require.Equal(t, orchestrator.ReasonInfrastructure, info.Result.Reason)
	require.Zero(t, info.Result.Runs)
	sub, err := s.Subscribe(context.Background(), j2, 0)
	require.NoError(t, err)
	evs, err := readTimeline(context.Background(), sub)
	require.NoError(t, err)
	end, err := checkTimeline(j2, evs)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonInfrastructure, end.Reason)
	require.Equal(t, scheduler.Completed, wait(t, s, j3).State)
}
