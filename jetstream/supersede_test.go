package jetstream

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// attemptEvents returns a pair's events 1..n as one attempt of its job
// records them: their payloads name the attempt, so that two attempts'
// events at one sequence differ; with terminal, the last one is the
// pair's terminal.
func attemptEvents(t *testing.T, ctx context.Context, pairID string, attempt, n int, terminal bool) []eventlog.Event {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Name: pairID, MaxEvents: 64, MaxBytes: 1 << 20})
	require.NoError(t, err)
	evs := make([]eventlog.Event, n)
	for i := range n {
		kind := "model.delta"
		if terminal && i == n-1 {
			kind = orchestrator.KindCompleted
		}
		raw, err := eventlog.NewRaw([]byte(`{"attempt":` + strconv.Itoa(attempt) + `,"i":` + strconv.Itoa(i+1) + `}`))
		require.NoError(t, err)
		evs[i], err = l.Append(ctx, eventlog.Record{Kind: kind, Time: time.Now(), Terminal: orchestrator.Terminal(kind), Payload: raw})
		require.NoError(t, err)
	}
	return evs
}

// attemptTimeline returns the publisher that a play of the given attempt
// of the job makes on the worker of b. Its batches go out only when
// full, at a terminal or at Flush: what the stream holds does not depend
// on timing.
func attemptTimeline(t *testing.T, b *Backend, pairID string, attempt int) *Publisher {
	t.Helper()
	_, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	h := &held{attempt: attempt, cancel: cancel, kick: make(chan struct{}, 1)}
	b.playing.add(pairID, h)
	defer b.playing.remove(pairID, h)
	pub, err := b.Timeline(pairID, TimelineConfig{Batch: MaxBatch, Linger: time.Hour})
	require.NoError(t, err)
	return pub
}

// continueTimeline is what a resume does before its pair goes on: it
// reads the timeline from the stream and fences its publisher's first
// batch on the subject's last message read.
func continueTimeline(t *testing.T, ctx context.Context, b *Backend, pairID string, attempt int) (*Publisher, storedTimeline) {
	t.Helper()
	rec, err := b.stored(ctx, pairID)
	require.NoError(t, err)
	pub := attemptTimeline(t, b, pairID, attempt)
	pub.last, pub.fence, pub.fenced = rec.lastSeq, rec.streamSeq, true
	return pub, rec
}

func observe(t *testing.T, ctx context.Context, pub *Publisher, evs ...eventlog.Event) {
	t.Helper()
	for _, e := range evs {
		require.NoError(t, pub.Observe(ctx, e))
	}
	require.NoError(t, pub.Flush(ctx))
}

// supersede leaves on the stream what a worker paused past AckWait
// leaves there. Attempt 1, on worker one, stores events 1-3 and stalls;
// attempt 2, on worker two, takes the job over, rebuilds the timeline
// from the stream and stores its continuation's first batch (event 4),
// fenced. Then attempt 1, which has not yet noticed at a heartbeat that
// it lost the job, goes on: it stores its events 4, then 5-6 (the range
// of attempt 2's next batch) before attempt 2 stores its own 5-6. With
// ended, attempt 2 then stores its terminal, event 7; last, attempt 1
// stores its 7-8. It returns the timeline a reader must see: attempt 1's
// events 1-3, then attempt 2's.
func supersede(t *testing.T, ctx context.Context, one, two *Backend, pairID string, ended bool) []eventlog.Event {
	t.Helper()
	stale := attemptEvents(t, ctx, pairID, 1, 8, false)
	cont := attemptEvents(t, ctx, pairID, 2, 7, true)
	if !ended {
		cont = cont[:6]
	}
	first := attemptTimeline(t, one, pairID, 1)
	observe(t, ctx, first, stale[:3]...)

	second, rec := continueTimeline(t, ctx, two, pairID, 2)
	require.Equal(t, uint64(3), rec.lastSeq)
	observe(t, ctx, second, cont[3])

	observe(t, ctx, first, stale[3])
	observe(t, ctx, first, stale[4:6]...)
	observe(t, ctx, second, cont[4:6]...)
	if ended {
		observe(t, ctx, second, cont[6])
	}
	observe(t, ctx, first, stale[6:8]...)
	return append(stale[:3:3], cont[3:]...)
}

// TestS1_ASupersededAttemptIsNeverServedAfterItsSuccessor: a worker
// paused past AckWait publishes events of its pair after another
// worker's continuation was stored, before its heartbeat tells it the
// job is no longer its own. The reader serve streams from (Events,
// from every cursor, replaying and tailing) and the history it reads
// (Pair) yield the timeline the continuation carries on, byte for byte,
// without a gap or a duplicate: none of the stale attempt's events after
// the continuation's first message, though some are at sequences the
// continuation had not reached when they were stored, and though one of
// its batches has the range of one of the continuation's.
func TestS1_ASupersededAttemptIsNeverServedAfterItsSuccessor(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	const name, pairID = "superseded", "pair-stale"
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: pairID, Spec: []byte("x")})
	require.NoError(t, err)
	one, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	two, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)

	want := supersede(t, ctx, one, two, pairID, true)
	for after := range uint64(len(want)) + 1 {
		for _, follow := range []bool{false, true} {
			got, err := collect(t, ctx, b, pairID, after, follow)
			require.NoError(t, err, "after %d follow %v", after, follow)
			require.Equal(t, encoded(want[after:]), got, "after %d follow %v", after, follow)
		}
	}
	rec, err := b.Pair(ctx, pairID)
	require.NoError(t, err)
	var got []eventlog.Event
	for _, en := range rec.Events {
		got = append(got, en.Event)
	}
	require.Equal(t, encoded(want), encoded(got))
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
	require.Equal(t, 3, streamTimelines(t, b)[pairID].superseded, "attempt 1's messages after attempt 2's first")
}

// TestD2_AResumeNeverRebuildsFromASupersededAttempt: the resume reader
// rebuilds a pair from the events its latest attempt carries on, not
// from those a paused attempt published after it took over; its fence
// is the subject's last message all the same, so that a third attempt's
// continuation is stored, and readers then serve attempts 1, 2 and 3 in
// turn while attempt 2 goes on publishing.
func TestD2_AResumeNeverRebuildsFromASupersededAttempt(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	const name, pairID = "rebuilt", "pair-stale"
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	one, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)
	two, err := Open(ctx, testConfig(connect(t, s.ClientURL()), name))
	require.NoError(t, err)

	want := supersede(t, ctx, one, two, pairID, false)
	third, rec := continueTimeline(t, ctx, b, pairID, 3)
	require.Equal(t, uint64(len(want)), rec.lastSeq)
	require.Len(t, rec.events, len(want))
	for i, e := range want {
		raw, ok := e.Payload().(eventlog.Raw)
		require.True(t, ok)
		require.Equal(t, orchestrator.RecordedEvent{Seq: e.Seq(), Kind: e.Kind(), Payload: raw.Bytes()}, rec.events[i], "event %d", i+1)
	}
	last, err := b.events.GetLastMsgForSubject(ctx, b.eventsSubject(pairID))
	require.NoError(t, err)
	require.Equal(t, last.Sequence, rec.streamSeq, "the fence is not the subject's last message")

	// Attempt 3 carries on; attempts 1 and 2 still publish.
	next := attemptEvents(t, ctx, pairID, 3, len(want)+2, true)
	observe(t, ctx, third, next[len(want)])
	observe(t, ctx, attemptTimeline(t, two, pairID, 2), attemptEvents(t, ctx, pairID, 2, 9, false)[6:]...)
	observe(t, ctx, third, next[len(want)+1])
	want = append(want, next[len(want):]...)
	got, err := collect(t, ctx, b, pairID, 0, false)
	require.NoError(t, err)
	require.Equal(t, encoded(want), got)
}

// subjectAttempts returns the attempt that each message on the pair's
// subject names, in stream order.
func subjectAttempts(t *testing.T, ctx context.Context, b *Backend, pairID string) []string {
	t.Helper()
	cons, err := b.events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{b.eventsSubject(pairID)}})
	require.NoError(t, err)
	it, err := cons.Messages()
	require.NoError(t, err)
	defer it.Stop()
	var out []string
	for {
		msg, err := it.Next()
		require.NoError(t, err)
		out = append(out, msg.Headers().Get(attemptHdr))
		meta, err := msg.Metadata()
		require.NoError(t, err)
		if meta.NumPending == 0 {
			return out
		}
	}
}
