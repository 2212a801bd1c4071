package scheduler_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// benchThroughput submits jobs — two text workers on cycling scripted
// providers, relay pattern, one shared config — to a scheduler with
// GOMAXPROCS pair slots and as many model slots (so every model operation
// goes through the decorator). It keeps at most backlog jobs outstanding,
// as a host that collects results as jobs end, and reports pairs per
// second including the final drain. retain 0 is the default.
func benchThroughput(b *testing.B, d orchestrator.Delivery, backlog, retain int) {
	benchPairs(b, d, runtime.GOMAXPROCS(0), backlog, retain)
}

// benchPairs is benchThroughput with pairs slots (and model slots).
func benchPairs(b *testing.B, d orchestrator.Delivery, pairs, backlog, retain int) {
	cfg := relay(b, cycling("Hello there."), cycling("Looks good."))
	cfg.Timeline.Delivery = d
	s, err := scheduler.New(scheduler.Config{Pairs: pairs, ModelOps: pairs, Queue: backlog, Retain: retain})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ring := make([]string, backlog)
	n := 0
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		if n >= backlog {
			// A job the scheduler no longer keeps has ended.
			if _, err := s.Wait(ctx, ring[n%backlog]); err != nil && !errors.Is(err, scheduler.ErrNotFound) {
				b.Fatal(err)
			}
		}
		jobID, err := s.Submit(ctx, scheduler.Job{Pair: cfg})
		if err != nil {
			b.Fatal(err)
		}
		ring[n%backlog] = jobID
		n++
	}
	b.StartTimer() // the drain belongs to the measurement
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if st := s.Stats(); st.Completed != uint64(n) {
		b.Fatalf("%d of %d jobs completed (%d failed)", st.Completed, n, st.Failed)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pair")
}

// cpuTime is the process's user and system CPU time so far. On a machine
// shared with other work, CPU per pair compares builds better than time.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkSchedulerThroughput is the performance table's scheduler row:
// a backlog of 64 jobs, 64 finished jobs kept, the pair timeline filled as
// each run ends (AfterRun), as in BenchmarkPairRelay.
func BenchmarkSchedulerThroughput(b *testing.B) { benchThroughput(b, orchestrator.AfterRun, 64, 64) }

// BenchmarkSchedulerPairs is BenchmarkSchedulerThroughput with pairs=N
// slots, so N pairs play at once: the scaling curve of README's "Scaling"
// section. On a machine with fewer cores than N, pairs/s should hold
// steady rather than grow.
func BenchmarkSchedulerPairs(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run("pairs="+strconv.Itoa(n), func(b *testing.B) { benchPairs(b, orchestrator.AfterRun, n, 64, 64) })
	}
}

// BenchmarkSchedulerThroughputLive relays every run event into the pair
// timeline as it is committed (Live delivery, the orchestrator default).
func BenchmarkSchedulerThroughputLive(b *testing.B) { benchThroughput(b, orchestrator.Live, 64, 64) }

// BenchmarkSchedulerThroughputRetainDefault keeps DefaultRetain finished
// jobs (each with its pair and timeline) behind a backlog of 512: a larger
// table and live heap.
func BenchmarkSchedulerThroughputRetainDefault(b *testing.B) {
	benchThroughput(b, orchestrator.AfterRun, 512, 0)
}

// BenchmarkQueuedJobMemory measures the heap one queued job costs: 100,000
// jobs submitted behind a job that holds the only pair slot, live heap
// before and after, after a full GC each time.
func BenchmarkQueuedJobMemory(b *testing.B) {
	const jobs = 100_000
	block := newHeld("First.")
	first := relay(b, block, cycling("OK."))
	rest := relay(b, cycling("Draft."), cycling("OK."))
	ctx := context.Background()
	var perJob float64
	b.ReportAllocs()
	for b.Loop() {
		s, err := scheduler.New(scheduler.Config{Pairs: 1, Queue: jobs, Retain: 1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Submit(ctx, scheduler.Job{Pair: first}); err != nil {
			b.Fatal(err)
		}
		<-block.started
		before := liveHeap()
		for range jobs {
			if _, err := s.Submit(ctx, scheduler.Job{Pair: rest}); err != nil {
				b.Fatal(err)
			}
		}
		perJob = float64(liveHeap()-before) / jobs
		if st := s.Stats(); st.Queued != jobs {
			b.Fatalf("%d queued", st.Queued)
		}
		if err := s.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perJob, "B/queued-job")
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkSchedulerTeamBaseline plays the pairs of
// BenchmarkSchedulerThroughput without the scheduler: the same config on
// one orchestrator.Team, GOMAXPROCS goroutines each playing pair after
// pair (Team.Run), as the scheduler's GOMAXPROCS slots do.
// BenchmarkSchedulerCPURatio sets the two side by side in alternating
// rounds.
func BenchmarkSchedulerTeamBaseline(b *testing.B) {
	cfg := relay(b, cycling("Hello there."), cycling("Looks good."))
	cfg.Timeline.Delivery = orchestrator.AfterRun
	team, err := orchestrator.NewTeam(*cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var n atomic.Int64
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := team.Run(ctx, "pair-"+strconv.FormatInt(n.Add(1), 10), cfg.Task)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := p.Wait(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := team.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/pair")
}

// BenchmarkSchedulerCPURatio measures the scheduler's CPU per pair against
// BenchmarkSchedulerTeamBaseline's in alternating rounds in one process,
// so that both see the same phases of a shared machine: each of its
// rounds plays a share of b.N pairs through a scheduler (as
// BenchmarkSchedulerThroughput does) and then as many on one Team (as
// BenchmarkSchedulerTeamBaseline does), each timed by the process's CPU.
// cpu-ratio is the scheduler's CPU per pair over the Team's.
func BenchmarkSchedulerCPURatio(b *testing.B) {
	const rounds = 6
	cfg := relay(b, cycling("Hello there."), cycling("Looks good."))
	cfg.Timeline.Delivery = orchestrator.AfterRun
	per := max(1, (b.N+rounds-1)/rounds)
	var sched, team time.Duration
	b.ReportAllocs()
	for range rounds {
		cpu0 := cpuTime()
		playScheduled(b, cfg, per)
		cpu1 := cpuTime()
		playOnTeam(b, cfg, per)
		sched, team = sched+cpu1-cpu0, team+cpuTime()-cpu1
	}
	n := float64(rounds * per)
	b.ReportMetric(float64(sched.Nanoseconds())/n, "sched-cpu-ns/pair")
	b.ReportMetric(float64(team.Nanoseconds())/n, "team-cpu-ns/pair")
	b.ReportMetric(float64(sched)/float64(team), "cpu-ratio")
}

// playScheduled plays n jobs of cfg through a scheduler set up as
// BenchmarkSchedulerThroughput's, keeping at most 64 outstanding, and
// drains it.
func playScheduled(b *testing.B, cfg *orchestrator.Config, n int) {
	const backlog = 64
	pairs := runtime.GOMAXPROCS(0)
	s, err := scheduler.New(scheduler.Config{Pairs: pairs, ModelOps: pairs, Queue: backlog, Retain: backlog})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var ring [backlog]string
	for i := range n {
		if i >= backlog {
			if _, err := s.Wait(ctx, ring[i%backlog]); err != nil && !errors.Is(err, scheduler.ErrNotFound) {
				b.Fatal(err)
			}
		}
		jobID, err := s.Submit(ctx, scheduler.Job{Pair: cfg})
		if err != nil {
			b.Fatal(err)
		}
		ring[i%backlog] = jobID
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if st := s.Stats(); st.Completed != uint64(n) {
		b.Fatalf("%d of %d jobs completed (%d failed)", st.Completed, n, st.Failed)
	}
}

// playOnTeam plays n pairs of cfg on one Team, GOMAXPROCS goroutines each
// playing pair after pair, as BenchmarkSchedulerTeamBaseline does.
func playOnTeam(b *testing.B, cfg *orchestrator.Config, n int) {
	team, err := orchestrator.NewTeam(*cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				p, err := team.Run(ctx, "pair-"+strconv.FormatInt(i, 10), cfg.Task)
				if err == nil {
					_, err = p.Wait(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := team.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
