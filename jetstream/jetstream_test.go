package jetstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

func startServer(t testing.TB, dir string) *server.Server {
	t.Helper()
	s, err := StartEmbedded(EmbeddedConfig{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// work runs an in-process worker until the test ends.
func work(t *testing.T, b *Backend, play PlayFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Work(ctx, WorkerConfig{Pairs: 2, Play: play, Drain: time.Second}) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// waitState blocks until the job's status satisfies ok.
func waitState(t *testing.T, ctx context.Context, b *Backend, jobID string, ok func(job.Status) bool) job.Status {
	t.Helper()
	w, err := b.kv.Watch(ctx, stateKey(jobID))
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		st, err := decode(e.Value())
		require.NoError(t, err)
		if ok(st) {
			return st
		}
	}
	t.Fatalf("job %s: %v", jobID, ctx.Err())
	return job.Status{}
}

func running(st job.Status) bool { return st.State == job.Running }

// terminals counts, per job, the terminal statuses ever written, from a
// watch on the whole bucket that starts before any job.
type terminals struct {
	b      *Backend
	mu     sync.Mutex
	count  map[string]int
	marks  chan string
	marked int
	stop   func()
	done   chan struct{}
	// changed is signalled after each terminal counted.
	changed chan struct{}
}

// waitJobs blocks until n jobs have a terminal status.
func (tm *terminals) waitJobs(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for {
		tm.mu.Lock()
		have := len(tm.count)
		tm.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-tm.changed:
		case <-ctx.Done():
			t.Fatalf("%d of %d jobs ended: %v", have, n, ctx.Err())
		}
	}
}

// caughtUp writes a marker into the bucket and waits until the watch has
// delivered it: a watch delivers in revision order, so every terminal
// written before the marker has then been counted.
func (tm *terminals) caughtUp(t *testing.T, ctx context.Context) {
	t.Helper()
	tm.mu.Lock()
	tm.marked++
	key := fmt.Sprintf("s.mark-%d", tm.marked)
	tm.mu.Unlock()
	_, err := tm.b.kv.Put(ctx, key, []byte("mark"))
	require.NoError(t, err)
	for {
		select {
		case k := <-tm.marks:
			if k == key {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the watch did not deliver its marker: %v", ctx.Err())
		}
	}
}

func watchTerminals(t *testing.T, b *Backend) *terminals {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.kv.Watch(ctx, "s.>", jetstream.UpdatesOnly())
	require.NoError(t, err)
	tm := &terminals{b: b, count: map[string]int{}, marks: make(chan string, 16), stop: cancel, done: make(chan struct{}),
		changed: make(chan struct{}, 1)}
	go func() {
		defer close(tm.done)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				if strings.HasPrefix(e.Key(), "s.mark-") {
					select {
					case tm.marks <- e.Key():
					case <-ctx.Done():
						return
					}
					continue
				}
				if st, err := decode(e.Value()); err == nil && st.State.Terminal() {
					tm.mu.Lock()
					tm.count[st.ID]++
					tm.mu.Unlock()
					select {
					case tm.changed <- struct{}{}:
					default:
					}
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-tm.done })
	return tm
}

// startWorker re-executes the test binary as a worker process.
func startWorker(t *testing.T, url, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envURL+"="+url, envName+"="+name)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		requireGone(t, cmd.Process.Pid)
	})
	return cmd
}

// requireGone checks that the process has exited and been reaped.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	err := syscall.Kill(pid, 0)
	require.ErrorIs(t, err, syscall.ESRCH, "process %d still exists", pid)
}

func submitN(t *testing.T, ctx context.Context, b *Backend, prefix, spec string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		_, err := b.Submit(ctx, job.Job{ID: ids[i], Spec: []byte(spec)})
		require.NoError(t, err)
	}
	return ids
}

// TestD1_ExactlyOneTerminalWhenAWorkerIsKilled: a worker process is
// SIGKILLed while it plays a job; after AckWait the job is delivered to
// another worker process, which does not play it again but ends it
// failed (interrupted). Every job ends, each with exactly one terminal
// status ever written, and the killed process is gone.
func TestD1_ExactlyOneTerminalWhenAWorkerIsKilled(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "d1"))
	require.NoError(t, err)
	tm := watchTerminals(t, b)

	blocked := submitN(t, ctx, b, "blocked", "block", 1)[0]
	a := startWorker(t, s.ClientURL(), "d1")
	first := waitState(t, ctx, b, blocked, running)
	require.Equal(t, 1, first.Attempt)
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()
	requireGone(t, a.Process.Pid)

	ids := submitN(t, ctx, b, "ok", "ok", 50)
	startWorker(t, s.ClientURL(), "d1")
	startWorker(t, s.ClientURL(), "d1")
	for _, id := range ids {
		st, err := b.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, job.Completed, st.State, id)
	}
	st, err := b.Await(ctx, blocked)
	require.NoError(t, err)
	require.Equal(t, job.Failed, st.State)
	require.Equal(t, job.ReasonInterrupted, st.Reason)
	require.Equal(t, 2, st.Attempt)

	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	for _, id := range append(ids, blocked) {
		require.Equal(t, 1, tm.count[id], "terminal statuses of %s", id)
	}
}

// TestD1_CancelQueuedAndRunning: a queued job cancelled ends cancelled
// and is never played; a running one is cancelled through its watched
// key and ends cancelled; cancelling again changes nothing.
func TestD1_CancelQueuedAndRunning(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "cancel"))
	require.NoError(t, err)

	queued := submitN(t, ctx, b, "queued", "ok", 1)[0]
	require.NoError(t, b.Cancel(ctx, queued))
	st, err := b.Await(ctx, queued)
	require.NoError(t, err)
	require.Equal(t, job.Cancelled, st.State)

	var played sync.Map
	work(t, b, func(ctx context.Context, j job.Job) job.Report {
		played.Store(j.ID, true)
		return scripted(ctx, j)
	})
	blocked := submitN(t, ctx, b, "blocked", "block", 1)[0]
	waitState(t, ctx, b, blocked, running)
	require.NoError(t, b.Cancel(ctx, blocked))
	st, err = b.Await(ctx, blocked)
	require.NoError(t, err)
	require.Equal(t, job.Cancelled, st.State)
	require.NoError(t, b.Cancel(ctx, blocked))
	st, err = b.Status(ctx, blocked)
	require.NoError(t, err)
	require.Equal(t, job.Cancelled, st.State)

	// The cancelled queued job was delivered and settled, not played.
	after := submitN(t, ctx, b, "after", "ok", 1)[0]
	_, err = b.Await(ctx, after)
	require.NoError(t, err)
	_, was := played.Load(queued)
	require.False(t, was, "a job cancelled while queued was played")
	require.ErrorIs(t, b.Cancel(ctx, "no-such-job"), job.ErrNotFound)
}

// TestD1_MaxDeliverFailsTheJobAndRemovesIt: a job fetched and never
// acknowledged, as often as MaxDeliver allows, ends failed
// (max_deliveries) and its message leaves the stream.
func TestD1_MaxDeliverFailsTheJobAndRemovesIt(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	cfg := testConfig(connect(t, s.ClientURL()), "maxdeliver")
	cfg.MaxDeliver = 1
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	id := submitN(t, ctx, b, "lost", "ok", 1)[0]

	// A worker that takes the job and dies before claiming it.
	batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var fetched int
	for range batch.Messages() {
		fetched++
	}
	require.Equal(t, 1, fetched)

	sub, err := b.watchMaxDeliveries()
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	st, err := b.Await(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Failed, st.State)
	require.Equal(t, job.ReasonMaxDeliveries, st.Reason)
	info, err := b.stream.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "the job's message stays in the stream")
}

// TestD1_ServerRestartLosesNoAcknowledgedJob: jobs the stream
// acknowledged survive the server's shutdown and restart on the same
// storage, and all complete afterwards.
func TestD1_ServerRestartLosesNoAcknowledgedJob(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	s1, err := StartEmbedded(EmbeddedConfig{Dir: dir})
	require.NoError(t, err)
	nc1, err := nats.Connect(s1.ClientURL())
	require.NoError(t, err)
	b1, err := Open(ctx, testConfig(nc1, "restart"))
	require.NoError(t, err)
	ids := submitN(t, ctx, b1, "kept", "ok", 30)
	nc1.Close()
	s1.Shutdown()
	s1.WaitForShutdown()

	s2 := startServer(t, dir)
	b2, err := Open(ctx, testConfig(connect(t, s2.ClientURL()), "restart"))
	require.NoError(t, err)
	work(t, b2, scripted)
	for _, id := range ids {
		st, err := b2.Await(ctx, id)
		require.NoError(t, err)
		require.Equal(t, job.Completed, st.State, id)
	}
	_, err = b2.Submit(ctx, job.Job{ID: ids[0], Spec: []byte("ok")})
	var be interface{ Error() string }
	require.True(t, errors.As(err, &be), "a job ID in use is refused")
}

// TestD1_SIGTERMDrainsWithinItsBound: a worker process told to stop with
// SIGTERM while its pair is in a call that never ends stops fetching and
// exits 0 once its drain bound has passed, not later. It hands the job
// back without ending the pair: nothing of the pair's end reaches the
// events stream, and another worker, on another machine, resumes the
// pair from it, runs the idempotent call again and completes the job,
// with exactly one terminal status.
func TestD1_SIGTERMDrainsWithinItsBound(t *testing.T) {
	dir := t.TempDir()
	drainDuringCall(t, "drain", filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db"), "events")
}

// TestD1_SIGTERMHandsBackToAWorkerSharingItsStore: as above, the worker
// that gets the job next sharing the drained worker's store, which holds
// the pair: the store did not record the pair as ended either, so the
// worker resumes it from there and completes it.
func TestD1_SIGTERMHandsBackToAWorkerSharingItsStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spice.db")
	drainDuringCall(t, "drainshared", path, path, "either")
	rd, err := store.OpenConfig(context.Background(), store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer rd.Close()
	rec, err := rd.Pair(context.Background(), "pair-drain")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
}

// drainDuringCall plays one pair job on a worker process recording into
// the store at first, SIGTERMs it while the reviewer's write (an
// idempotent call) never ends, checks that it exits within its drain
// bound and hands the job back unended, and has a worker process
// recording into second, resuming as mode says (envResume), complete it.
func drainDuringCall(t *testing.T, name, first, second, mode string) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	const jobID = "pair-drain"
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	l := newLoopback(t, jobID+"/c-reviewer")
	_, err = b.Submit(ctx, job.Job{ID: jobID, Spec: []byte("Write a line about the sea.")})
	require.NoError(t, err)
	a := startPairWorker(t, s.ClientURL(), name, first, l, "idempotent", envResume+"="+mode)
	select {
	case <-l.started:
	case <-ctx.Done():
		t.Fatal("the reviewer's write never started")
	}

	exited := make(chan error, 1)
	sent := time.Now()
	require.NoError(t, a.Process.Signal(syscall.SIGTERM))
	go func() { exited <- a.Wait() }()
	bound := time.NewTimer(testDrain + drainMargin)
	defer bound.Stop()
	select {
	case err := <-exited:
		took := time.Since(sent)
		require.NoError(t, err, "the worker exits 0 after draining")
		require.GreaterOrEqual(t, took, testDrain, "the worker did not wait for its pair")
		t.Logf("exited %v after SIGTERM (drain %v)", took, testDrain)
	case <-bound.C:
		t.Fatalf("the worker did not exit within its drain bound %v and a margin of %v", testDrain, drainMargin)
	}
	requireGone(t, a.Process.Pid)
	st, err := b.Status(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, job.Running, st.State, "a job handed back stays running until it is taken again")
	tl := streamTimelines(t, b)[jobID]
	require.Zero(t, tl.terminals, "the handed-back pair ended on the stream: %v", tl.kinds)

	startPairWorker(t, s.ClientURL(), name, second, l, "idempotent", envResume+"="+mode)
	st, err = b.Await(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)
	require.Equal(t, 2, st.Attempt)
	_, tools := l.counts()
	require.Equal(t, map[string]int{jobID + "/c-writer": 1, jobID + "/c-reviewer": 2}, tools)
	tl = streamTimelines(t, b)[jobID]
	require.Equal(t, 1, tl.resumed)
	require.Equal(t, 1, tl.terminals)
	require.Equal(t, orchestrator.KindCompleted, tl.kinds[len(tl.kinds)-1])
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	require.Equal(t, 1, tm.count[jobID])
}

// TestD1_AWorkerHoldsOneJobPerSlot: a worker whose slots all play jobs
// that do not end holds exactly those jobs: the rest stay pending on the
// server for other workers, none delivered to it and buffered unplayed.
func TestD1_AWorkerHoldsOneJobPerSlot(t *testing.T) {
	const slots, jobs = 3, 8
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "slots"))
	require.NoError(t, err)
	submitN(t, ctx, b, "blocked", "block", jobs)

	started := make(chan string, jobs)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Work(wctx, WorkerConfig{Pairs: slots, Drain: time.Second, Play: func(ctx context.Context, j job.Job) job.Report {
			started <- j.ID
			return scripted(ctx, j)
		}})
	}()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	for range slots {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the worker did not fill its slots")
		}
	}
	info, err := b.cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, slots, info.NumAckPending, "jobs delivered to the worker")
	require.Equal(t, uint64(jobs-slots), info.NumPending, "jobs left for other workers")
}

// TestD1_ADrainingWorkerHandsBackWhatItFetches: a job that reaches a
// worker after its drain began, from a fetch already on its way, is
// handed back unplayed: it stays queued, delivered once more.
func TestD1_ADrainingWorkerHandsBackWhatItFetches(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "late"))
	require.NoError(t, err)

	// The slot's first fetch waits until the drain has begun and the
	// job is in the stream: the job arrives from a fetch sent before.
	fetching, submitted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.beforeFetch = func() {
		once.Do(func() {
			close(fetching)
			<-submitted
		})
	}
	var played sync.Map
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Work(wctx, WorkerConfig{Pairs: 1, Drain: time.Second, Play: func(ctx context.Context, j job.Job) job.Report {
			played.Store(j.ID, true)
			return scripted(ctx, j)
		}})
	}()
	select {
	case <-fetching:
	case <-ctx.Done():
		t.Fatal("the worker never fetched")
	}
	stop()
	late := submitN(t, ctx, b, "late", "ok", 1)[0]
	close(submitted)
	require.NoError(t, <-done)

	_, was := played.Load(late)
	require.False(t, was, "a job fetched after the drain began was played")
	st, err := b.Status(ctx, late)
	require.NoError(t, err)
	require.Equal(t, job.Queued, st.State)
	meta, err := fetchOne(t, ctx, b).Metadata()
	require.NoError(t, err)
	require.Equal(t, uint64(2), meta.NumDelivered, "the job was not delivered to the draining worker")
}

// TestD1_AHandedBackPlayRecordsNothingMore: an observer a play made with
// Attempt (a worker's local store) takes the pair's events until the
// drain's bound hands the job back, and none after, its end included;
// the job stays running.
func TestD1_AHandedBackPlayRecordsNothingMore(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "handback"))
	require.NoError(t, err)
	const jobID = "pair-back"
	evs := attemptEvents(t, ctx, jobID, 1, 2, true)
	var mu sync.Mutex
	var recorded []uint64
	rec := eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
		mu.Lock()
		defer mu.Unlock()
		recorded = append(recorded, e.Seq())
		return nil
	})
	first, last := make(chan error, 1), make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Work(wctx, WorkerConfig{Pairs: 1, Drain: 100 * time.Millisecond, Play: func(ctx context.Context, j job.Job) job.Report {
			o := b.Attempt(j.ID, rec)
			first <- o.Observe(ctx, evs[0])
			<-ctx.Done()
			last <- o.Observe(context.WithoutCancel(ctx), evs[1])
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: job.ReasonCancelled}
		}})
	}()
	_, err = b.Submit(ctx, job.Job{ID: jobID, Spec: []byte("block")})
	require.NoError(t, err)
	require.NoError(t, <-first)
	stop()
	require.ErrorIs(t, <-last, errHandedBack)
	require.NoError(t, <-done)
	mu.Lock()
	require.Equal(t, []uint64{1}, recorded)
	mu.Unlock()
	st, err := b.Status(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, job.Running, st.State)
	require.Equal(t, 1, st.Attempt)
}

// FuzzQueuedStatus: the queued header of a job's message reads back
// what Submit wrote, and anything else reads as "unknown" (rev 0).
func FuzzQueuedStatus(f *testing.F) {
	at := time.Date(2026, 12, 3, 15, 0, 0, 123, time.UTC)
	f.Add(queuedHeader(7, at))
	f.Add("7")
	f.Add("0 1")
	f.Add("18446744073709551615 -1")
	st, rev := queuedStatus("j", queuedHeader(7, at))
	require.Equal(f, uint64(7), rev)
	require.Equal(f, job.Status{ID: "j", State: job.Queued, Submitted: at, Seq: 7}, st)
	f.Fuzz(func(t *testing.T, v string) {
		st, rev := queuedStatus("j", v)
		if rev == 0 {
			require.Equal(t, job.Status{}, st)
			return
		}
		require.Equal(t, job.Queued, st.State)
		require.LessOrEqual(t, len(v), 64)
	})
}
