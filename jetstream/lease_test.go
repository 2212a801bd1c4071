package jetstream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// pairEvents returns a pair's timeline of the given kinds, in sequence
// from 1; a terminal kind ends it.
func pairEvents(t *testing.T, ctx context.Context, kinds ...string) []eventlog.Event {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Name: "timeline", MaxEvents: 16, MaxBytes: 1 << 20})
	require.NoError(t, err)
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	evs := make([]eventlog.Event, len(kinds))
	for i, k := range kinds {
		evs[i], err = l.Append(ctx, eventlog.Record{Kind: k, Time: time.Now(), Terminal: orchestrator.Terminal(k), Payload: raw})
		require.NoError(t, err)
	}
	return evs
}

// TestD1_AJobRedeliveredToItsOwnWorkerEndsOnce: a worker with two slots
// loses its connection past AckWait; the job it plays is delivered again
// to its other slot once it is back. The first attempt is stopped as
// lost and publishes nothing more; the second continues the timeline
// fenced on what the first stored and ends the job: one terminal status,
// one gap-free timeline on the events stream with one pair terminal.
func TestD1_AJobRedeliveredToItsOwnWorkerEndsOnce(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "selfover"))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	px := startProxy(t, s.Addr().String())
	logs := newLines()
	nc, err := Connect(px.url(), ConnectConfig{Name: "away", Log: slog.New(slog.NewTextHandler(logs, nil)), ReconnectWait: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	wb, err := Open(ctx, testConfig(nc, "selfover"))
	require.NoError(t, err)

	first := pairEvents(t, ctx, orchestrator.KindStarted, orchestrator.KindCancelled)
	cont := pairEvents(t, ctx, orchestrator.KindStarted, orchestrator.KindCompleted)
	started, ended := make(chan error, 1), make(chan playEnd, 1)
	resumed, release := make(chan int, 1), make(chan struct{})
	play := func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: "cancelled"}
		pub, err := wb.Timeline(j.ID, TimelineConfig{})
		if err == nil {
			err = pub.Observe(ctx, first[0])
		}
		if err == nil {
			err = pub.Flush(ctx)
		}
		started <- err
		<-ctx.Done()
		// As a pair does when it is stopped: its terminal.
		ended <- playEnd{cause: context.Cause(ctx), publish: pub.Observe(context.WithoutCancel(ctx), first[1])}
		return rep
	}
	resume := func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "events"}
		resumed <- j.Attempt
		select {
		case <-release:
		case <-ctx.Done():
			rep.State, rep.Reason = job.Cancelled, "cancelled"
			return rep
		}
		rec, err := wb.stored(ctx, j.ID)
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		pub, err := wb.Timeline(j.ID, TimelineConfig{})
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		pub.last, pub.fence, pub.fenced = rec.lastSeq, rec.streamSeq, true
		if err := pub.Observe(ctx, cont[rec.lastSeq]); err != nil {
			rep.Error = err.Error()
			return rep
		}
		rep.State, rep.Reason = job.Completed, "completed"
		return rep
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- wb.Work(wctx, WorkerConfig{Pairs: 2, Drain: time.Second, Play: play, Resume: resume})
	}()
	defer func() { stop(); require.NoError(t, <-done) }()
	id := submitN(t, ctx, b, "self", "block", 1)[0]
	select {
	case err := <-started:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the worker did not start playing")
	}

	px.cut()
	awaitHealth(t, ctx, wb, down)
	require.Contains(t, logs.next(t, ctx), "NATS connection lost")
	// AckWait passes without a heartbeat: the job is delivered again,
	// here to the test, which hands it back once the worker is back so
	// that the worker's free slot receives it.
	msg := fetchOne(t, ctx, b)
	px.restore(t)
	require.Contains(t, logs.next(t, ctx), "NATS connection restored")
	require.NoError(t, msg.Nak())
	var attempt int
	select {
	case attempt = <-resumed:
	case <-ctx.Done():
		t.Fatal("the job was not delivered again to the worker")
	}
	select {
	case end := <-ended:
		require.ErrorIs(t, end.cause, errLeaseLost)
		require.ErrorIs(t, end.publish, errLeaseLost, "a lost play publishes nothing")
	case <-ctx.Done():
		t.Fatal("the worker kept playing the attempt its other slot took over")
	}
	close(release)
	st, err := b.Await(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State, st.Error)
	require.Equal(t, attempt, st.Attempt)

	var kinds []string
	var seq uint64
	for e, err := range b.Events(ctx, id, 0, false) {
		require.NoError(t, err)
		seq++
		require.Equal(t, seq, e.Seq())
		kinds = append(kinds, e.Kind())
	}
	require.Equal(t, []string{orchestrator.KindStarted, orchestrator.KindCompleted}, kinds)
	require.Equal(t, []string{"1", strconv.Itoa(attempt)}, subjectAttempts(t, ctx, b, id), "each message names the attempt that published it")
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	require.Equal(t, 1, tm.count[id])
}

// testClock is a clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestD1_AWorkerPausedPastAckWaitLetsGoOfItsJob: a worker's process
// stalls (SIGSTOP, starvation) past AckWait with its connection up, and
// meanwhile another delivery takes its job over. At its next heartbeat
// the worker sees that more time passed than a lease lasts, checks the
// job, stops its play as lost and publishes nothing more of it.
func TestD1_AWorkerPausedPastAckWaitLetsGoOfItsJob(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "paused"))
	require.NoError(t, err)
	wb, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "paused"))
	require.NoError(t, err)
	clk := &testClock{now: time.Now()}
	wb.now = clk.Now
	terminal := terminalEvent(t, ctx)
	started, ended := make(chan struct{}, 1), make(chan playEnd, 1)
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- wb.Work(wctx, WorkerConfig{Pairs: 1, Drain: time.Second, Play: func(ctx context.Context, j job.Job) job.Report {
			pub, err := wb.Timeline(j.ID, TimelineConfig{})
			if err != nil {
				panic(err)
			}
			started <- struct{}{}
			<-ctx.Done()
			ended <- playEnd{cause: context.Cause(ctx), publish: pub.Observe(context.WithoutCancel(ctx), terminal)}
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Cancelled, Reason: "cancelled"}
		}})
	}()
	defer func() { stop(); require.NoError(t, <-done) }()
	id := submitN(t, ctx, b, "paused", "block", 1)[0]
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the worker did not start playing")
	}

	// What a delivery after AckWait does first: take the attempt.
	st, err := b.transition(ctx, id, func(st job.Status) (job.Status, bool) {
		st.Attempt++
		return st, true
	})
	require.NoError(t, err)
	require.Equal(t, 2, st.Attempt)
	// The worker's clock says its process was away past AckWait.
	clk.advance(testConfig(nil, "").AckWait)
	select {
	case end := <-ended:
		require.ErrorIs(t, end.cause, errLeaseLost)
		require.ErrorIs(t, end.publish, errLeaseLost, "a lost play publishes nothing")
	case <-ctx.Done():
		t.Fatal("the worker kept playing a job another delivery took while it was paused")
	}
	for _, err := range b.Events(ctx, id, 0, false) {
		require.ErrorIs(t, err, job.ErrNotFound, "the lost play's terminal reached the events stream")
	}
	st, err = b.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Running, st.State, "the lost play settled the job")
	require.Equal(t, 2, st.Attempt)
}

// TestD1_AnAttemptHeldAgainReplacesTheOld: a job held again by the same
// worker (delivered to another of its slots) marks the older attempt
// lost and stops it, and the older one's end removes only itself.
func TestD1_AnAttemptHeldAgainReplacesTheOld(t *testing.T) {
	cs := &inflight{jobs: map[string]*held{}}
	ctx1, cancel1 := context.WithCancelCause(context.Background())
	defer cancel1(nil)
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	h1 := &held{cancel: cancel1, kick: make(chan struct{}, 1)}
	h2 := &held{cancel: cancel2, kick: make(chan struct{}, 1)}
	cs.add("j", h1)
	require.Same(t, h1, cs.get("j"))
	cs.add("j", h2)
	require.True(t, h1.lost.Load())
	require.True(t, errors.Is(context.Cause(ctx1), errLeaseLost))
	require.False(t, h2.lost.Load())
	require.NoError(t, ctx2.Err())
	cs.remove("j", h1)
	require.Same(t, h2, cs.get("j"), "the older attempt's end removed the newer")
	cs.remove("j", h2)
	require.Nil(t, cs.get("j"))
}

// TestD1_AnOlderDeliveryNeverTakesTheJobFromANewer: a worker fetches a
// job and stalls past AckWait before it claims it; the job is delivered
// again, and the newer delivery claims and plays it. When the stalled
// worker comes to its older delivery, it neither plays nor resumes the
// job, nor settles its message: the attempts that hold a job only grow,
// as the readers of the events stream rely on, and the newer delivery
// ends the job, once.
func TestD1_AnOlderDeliveryNeverTakesTheJobFromANewer(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "older"))
	require.NoError(t, err)
	id := submitN(t, ctx, b, "older", "block", 1)[0]
	fetch := func(delivered uint64) jetstream.Msg {
		t.Helper()
		msg := fetchOne(t, ctx, b)
		meta, err := msg.Metadata()
		require.NoError(t, err)
		require.Equal(t, delivered, meta.NumDelivered)
		return msg
	}
	first := fetch(1)  // the stalled worker's
	second := fetch(2) // AckWait passed without a heartbeat

	played, release := make(chan struct{}), make(chan struct{})
	cfg := WorkerConfig{
		Pairs: 1,
		Play: func(ctx context.Context, j job.Job) job.Report {
			close(played)
			<-release
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Completed, Reason: "completed"}
		},
		Resume: func(ctx context.Context, j job.Job) job.Report {
			t.Errorf("attempt %d took the job over from attempt 2", j.Attempt)
			return job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed, Reason: "resumed"}
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.handle(ctx, b.playing, second, cfg)
	}()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { free(); <-done })
	select {
	case <-played:
	case <-ctx.Done():
		t.Fatal("the newer delivery was not played")
	}
	b.handle(ctx, b.playing, first, cfg)
	st, err := b.Status(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Running, st.State)
	require.Equal(t, 2, st.Attempt)
	info, err := b.stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "the older delivery settled the job's message")

	free()
	<-done
	st, err = b.Await(ctx, id)
	require.NoError(t, err)
	require.Equal(t, job.Completed, st.State, st.Error)
	require.Equal(t, 2, st.Attempt)
}

// fetchOne takes the next job message off b's consumer, as a worker's free
// slot would, until ctx ends.
func fetchOne(t *testing.T, ctx context.Context, b *Backend) jetstream.Msg {
	t.Helper()
	for {
		batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			return m
		}
		require.NoError(t, ctx.Err())
	}
}
