package jetstream

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// resumeFrom is how the second worker process of a test resumes: from
// the events stream, or (SPICE_JS_TEST_RESUME_FROM=store) from its own
// store, as a worker without a shared store did before it could resume
// from the stream.
func resumeFrom() string {
	if v := os.Getenv("SPICE_JS_TEST_RESUME_FROM"); v != "" {
		return v
	}
	return "events"
}

// killOnAnotherMachine plays one pair job on a worker process with its
// own store, SIGKILLs it while the reviewer's write (the second run's
// call) is in progress, and starts a second worker process with another,
// empty store, to which the job is delivered again. It returns the job's
// terminal status and the second worker's store.
func killOnAnotherMachine(t *testing.T, replay string) (job.Status, *loopback, *Backend, string) {
	return killAndResume(t, replay, resumeFrom(), false)
}

// killAndResume is killOnAnotherMachine with the second worker's way to
// resume (envResume), and, if shared, one store for both workers.
func killAndResume(t *testing.T, replay, mode string, shared bool) (job.Status, *loopback, *Backend, string) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	name := "d2ev" + replay
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	tm := watchTerminals(t, b)
	l := newLoopback(t, "pair-d2/c-reviewer")

	const jobID = "pair-d2"
	_, err = b.Submit(ctx, job.Job{ID: jobID, Spec: []byte("Write a line about the sea.")})
	require.NoError(t, err)
	first := filepath.Join(t.TempDir(), "a.db")
	a := startPairWorker(t, s.ClientURL(), name, first, l, replay, envResume+"="+mode)
	select {
	case <-l.started:
	case <-ctx.Done():
		st, _ := b.Status(context.Background(), jobID)
		t.Fatalf("the reviewer's write never started: %+v", st)
	}
	require.NoError(t, a.Process.Signal(syscall.SIGKILL))
	_ = a.Wait()
	requireGone(t, a.Process.Pid)

	other := filepath.Join(t.TempDir(), "b.db")
	if shared {
		other = first
	}
	startPairWorker(t, s.ClientURL(), name, other, l, replay, envResume+"="+mode)
	st, err := b.Await(ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, 2, st.Attempt)
	tm.caughtUp(t, ctx)
	tm.mu.Lock()
	require.Equal(t, 1, tm.count[jobID], "terminal statuses")
	tm.mu.Unlock()
	return st, l, b, other
}

// TestD2_ResumesFromTheEventsStreamOnAnotherMachine: a worker process is
// SIGKILLed during the second run's call to an idempotent tool; the job
// is delivered to a worker process that shares no store with it (its own
// is empty), which resumes the pair from the timeline the events stream
// holds: no model request with a recorded answer is sent again, the
// first run's call is not run again, the idempotent call runs again, and
// the pair completes. Its own store never learns of the pair.
func TestD2_ResumesFromTheEventsStreamOnAnotherMachine(t *testing.T) {
	st, l, b, other := killOnAnotherMachine(t, "idempotent")
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)

	models, tools := l.counts()
	for key, n := range models {
		require.Equal(t, 1, n, "model request %s was sent again", key)
	}
	require.Len(t, models, 4, "two requests a worker")
	require.Equal(t, map[string]int{"pair-d2/c-writer": 1, "pair-d2/c-reviewer": 2}, tools)

	tl := streamTimelines(t, b)["pair-d2"]
	require.Equal(t, 1, tl.resumed)
	require.Equal(t, orchestrator.KindCompleted, tl.kinds[len(tl.kinds)-1])

	rd, err := store.OpenConfig(context.Background(), store.Config{Path: other, ReadOnly: true})
	require.NoError(t, err)
	defer rd.Close()
	_, err = rd.Pair(context.Background(), "pair-d2")
	require.ErrorIs(t, err, store.ErrNotFound, "the second worker's store recorded the pair")
}

// TestD2_UncertainMutatingCallFromTheEventsStream: a worker process is
// SIGKILLed during a call to a mutating tool not declared idempotent;
// the worker on another machine finds the call's start on the events
// stream without an outcome, never runs it again, and ends the job
// failed uncertain_tool_call, naming the call. The stream, which held
// the start before the call ran, is all it needs.
func TestD2_UncertainMutatingCallFromTheEventsStream(t *testing.T) {
	st, l, b, _ := killOnAnotherMachine(t, "unsafe")
	require.Equal(t, job.Failed, st.State)
	require.Equal(t, orchestrator.ReasonUncertainCall, st.Reason, st.Error)
	require.Contains(t, st.Error, "c-reviewer")
	models, tools := l.counts()
	require.Equal(t, map[string]int{"pair-d2/c-writer": 1, "pair-d2/c-reviewer": 1}, tools, "a mutating call ran again")
	for key, n := range models {
		require.Equal(t, 1, n, "model request %s was sent again", key)
	}
	tl := streamTimelines(t, b)["pair-d2"]
	require.Equal(t, 0, tl.resumed, "a refused pair publishes nothing")
}

// TestD2_PublishedContinuationIsOneTimeline: the resumed pair's events
// go to the same subject, continuing the recorded sequence: the stream
// holds one timeline from sequence 1 to one pair terminal, each event in
// exactly one message, the continuation beginning with pair.resumed;
// and a reader from cursor 0 (what serve streams) reads it whole.
func TestD2_PublishedContinuationIsOneTimeline(t *testing.T) {
	_, _, b, _ := killOnAnotherMachine(t, "idempotent")
	tl := streamTimelines(t, b)["pair-d2"]
	require.Equal(t, 1, tl.terminals)
	require.Equal(t, 1, tl.resumed)
	first := tl.kinds[tl.resumedAt-1]
	require.Equal(t, orchestrator.KindResumed, first)

	var seqs []uint64
	for e, err := range b.Events(testCtx(t), "pair-d2", 0, true) {
		require.NoError(t, err)
		seqs = append(seqs, e.Seq())
	}
	require.Len(t, seqs, len(tl.kinds))
	for i, s := range seqs {
		require.Equal(t, uint64(i+1), s)
	}
}

// TestD2_ResumedFromASharedStoreIsPublished: workers sharing one store
// resume a pair from that store's record, and the continuation goes to
// the events stream as well: a reader of the stream sees the pair
// resumed and ended, in one timeline.
func TestD2_ResumedFromASharedStoreIsPublished(t *testing.T) {
	st, l, b, _ := killAndResume(t, "idempotent", resumeFromShared(), true)
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)
	_, tools := l.counts()
	require.Equal(t, map[string]int{"pair-d2/c-writer": 1, "pair-d2/c-reviewer": 2}, tools)
	tl := streamTimelines(t, b)["pair-d2"]
	require.Equal(t, 1, tl.resumed)
	require.Equal(t, 1, tl.terminals)
	require.Equal(t, orchestrator.KindCompleted, tl.kinds[len(tl.kinds)-1])
}

// TestD2_WithAStoreWithoutThePairResumesFromTheStream: a worker whose
// own store does not hold the pair resumes it from the events stream.
func TestD2_WithAStoreWithoutThePairResumesFromTheStream(t *testing.T) {
	st, l, b, _ := killAndResume(t, "idempotent", resumeFromShared(), false)
	require.Equal(t, job.Completed, st.State, "%s: %s", st.Reason, st.Error)
	models, _ := l.counts()
	for key, n := range models {
		require.Equal(t, 1, n, "model request %s was sent again", key)
	}
	tl := streamTimelines(t, b)["pair-d2"]
	require.Equal(t, 1, tl.resumed)
	require.Equal(t, 1, tl.terminals)
}

// resumeFromShared is how a worker with a store resumes in the tests of
// ResumeFromStoreOrEvents; SPICE_JS_TEST_RESUME_FROM=store shows what
// ResumeFromStore alone does.
func resumeFromShared() string {
	if v := os.Getenv("SPICE_JS_TEST_RESUME_FROM"); v != "" {
		return v
	}
	return "either"
}

// streamTimeline is what the events stream holds of one pair, message by
// message.
type streamTimeline struct {
	kinds     []string // by sequence, from 1
	events    []string // their canonical JSON
	terminals int
	resumed   int
	resumedAt uint64 // the sequence of the last pair.resumed
	// superseded counts the messages of attempts superseded before
	// they were stored, which no reader yields.
	superseded int
	attempts   attempts
}

// streamTimelines reads every message of the events stream and checks
// that each pair's messages, but for those of superseded attempts, hold
// one timeline: from sequence 1, each message beginning right after the
// last one ended (no gap, no event stored twice), at most one pair
// terminal, and nothing after it.
func streamTimelines(t *testing.T, b *Backend) map[string]*streamTimeline {
	t.Helper()
	ctx := testCtx(t)
	out := map[string]*streamTimeline{}
	info, err := b.events.Info(ctx)
	require.NoError(t, err)
	if info.State.Msgs == 0 {
		return out
	}
	cons, err := b.events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	it, err := cons.Messages()
	require.NoError(t, err)
	defer it.Stop()
	prefix := len(b.eventsSubject(""))
	for {
		msg, err := it.Next()
		require.NoError(t, err)
		pairID := msg.Subject()[prefix:]
		tl := out[pairID]
		if tl == nil {
			tl = &streamTimeline{}
			out[pairID] = tl
		}
		stale, err := tl.attempts.superseded(msg.Headers())
		require.NoError(t, err)
		var evs []eventlog.Event
		if stale {
			tl.superseded++
		} else {
			evs, err = decodeBatch(msg.Data())
			require.NoError(t, err)
		}
		for _, e := range evs {
			require.Equal(t, uint64(len(tl.kinds)+1), e.Seq(), "pair %s: event %d out of place", pairID, e.Seq())
			require.Zero(t, tl.terminals, "pair %s: an event after its terminal", pairID)
			tl.kinds = append(tl.kinds, e.Kind())
			tl.events = append(tl.events, string(e.AppendJSON(nil)))
			switch {
			case orchestrator.Terminal(e.Kind()):
				tl.terminals++
			case e.Kind() == orchestrator.KindResumed:
				tl.resumed++
				tl.resumedAt = e.Seq()
			}
		}
		meta, err := msg.Metadata()
		require.NoError(t, err)
		if meta.NumPending == 0 {
			return out
		}
	}
}

// TestD2_AContinuationIsRefusedWhenTheTimelineMoved: a resumed pair's
// publisher stores its first batch only if the pair's subject is as the
// resume read it, and sends nothing before it knows. A worker that
// stalled and then published another event of the pair makes the
// continuation fail at its first event instead of storing a second
// event 4, or anything after.
func TestD2_AContinuationIsRefusedWhenTheTimelineMoved(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "fence"))
	require.NoError(t, err)
	const pairID = "pair-fence"
	events := func(n int) []eventlog.Event {
		l, err := eventlog.New(eventlog.Config{Name: pairID, MaxEvents: 64, MaxBytes: 1 << 20})
		require.NoError(t, err)
		var evs []eventlog.Event
		for i := 1; i <= n; i++ {
			raw, err := eventlog.NewRaw([]byte(`{"i":` + strconv.Itoa(i) + `}`))
			require.NoError(t, err)
			e, err := l.Append(ctx, eventlog.Record{Kind: "model.delta", Time: time.Now(), Payload: raw})
			require.NoError(t, err)
			evs = append(evs, e)
		}
		return evs
	}
	stalled, err := b.Timeline(pairID, TimelineConfig{})
	require.NoError(t, err)
	first := events(4)
	for _, e := range first[:3] {
		require.NoError(t, stalled.Observe(ctx, e))
	}
	require.NoError(t, stalled.Flush(ctx))
	rec, err := b.stored(ctx, pairID)
	require.NoError(t, err)
	require.Equal(t, uint64(3), rec.lastSeq)

	// The stalled worker goes on after the resume read the timeline.
	require.NoError(t, stalled.Observe(ctx, first[3]))
	require.NoError(t, stalled.Flush(ctx))

	pub, err := b.Timeline(pairID, TimelineConfig{})
	require.NoError(t, err)
	pub.last, pub.fence, pub.fenced = rec.lastSeq, rec.streamSeq, true
	next := events(5)[3:]
	require.Error(t, pub.Observe(ctx, next[0]), "the continuation was stored after a moved timeline")
	require.Error(t, pub.Observe(ctx, next[1]), "the continuation went on after a refusal")
	require.Error(t, pub.Flush(ctx))
	require.Len(t, streamTimelines(t, b)[pairID].kinds, 4)
}

// TestD2_ResumeFromEventsWhenCancelled: a job cancelled before its
// resume could read the stream ends cancelled, not with a timeline
// error, and asks nothing of the model or the tool.
func TestD2_ResumeFromEventsWhenCancelled(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "cancelled"))
	require.NoError(t, err)
	l := newLoopback(t, "")
	resume := b.ResumeFromEvents(pairBuilder(nil, l.srv.URL, tool.Unsafe), TimelineConfig{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	rep := resume(cctx, job.Job{ID: "pair-cancelled", Attempt: 2, Spec: []byte("Write.")})
	require.Equal(t, job.Cancelled, rep.State)
	require.Equal(t, job.ReasonCancelled, rep.Reason, rep.Error)
	models, tools := l.counts()
	require.Empty(t, models)
	require.Empty(t, tools)
}
