package jetstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// consumers returns how many consumers the events stream and the state
// bucket's stream have.
func consumers(t *testing.T, ctx context.Context, b *Backend) (events, state int) {
	t.Helper()
	ei, err := b.events.Info(ctx)
	require.NoError(t, err)
	s, err := b.js.Stream(ctx, "KV_"+b.cfg.Name+"_state")
	require.NoError(t, err)
	si, err := s.Info(ctx)
	require.NoError(t, err)
	return ei.State.Consumers, si.State.Consumers
}

// TestS3_ReadingATimelineLeavesNoConsumerBehind: every read of a pair's
// timeline (its record, its events from any cursor, the resume's read)
// and every listing removes what it made on the server when it ends, so
// a page polling a pair holds nothing there between its reads; the
// events stream bounds the readers at once.
func TestS3_ReadingATimelineLeavesNoConsumerBehind(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "reads"))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "pair-1", Spec: []byte("x")})
	require.NoError(t, err)
	pub, err := b.Timeline("pair-1", TimelineConfig{Batch: 8, Linger: time.Millisecond})
	require.NoError(t, err)
	playTimeline(t, ctx, "pair-1", pub, 50)

	baseEvents, baseState := consumers(t, ctx, b)
	require.Zero(t, baseEvents)
	for range 20 {
		rec, err := b.Pair(ctx, "pair-1")
		require.NoError(t, err)
		require.Len(t, rec.Events, 50)
		for _, after := range []uint64{0, 10, 49} {
			got, err := collect(t, ctx, b, "pair-1", after, false)
			require.NoError(t, err)
			require.Len(t, got, 50-int(after))
		}
		got, err := collect(t, ctx, b, "pair-1", 20, true)
		require.NoError(t, err)
		require.Len(t, got, 30)
		st, err := b.stored(ctx, "pair-1")
		require.NoError(t, err)
		require.Len(t, st.events, 50)
		pairs, err := b.ListPairs(ctx, store.ListOptions{})
		require.NoError(t, err)
		require.Len(t, pairs, 1)
	}
	events, state := consumers(t, ctx, b)
	require.Equal(t, baseEvents, events, "consumers left on the events stream")
	require.Equal(t, baseState, state, "consumers left on the state bucket")

	ei, err := b.events.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, DefaultEventReaders, ei.Config.MaxConsumers)
}

// TestS3_TheEventsStreamRefusesReadersOverItsBound: a read beyond
// MaxEventReaders at once is refused at once rather than held, and the
// place is free again once the reader holding it ends.
func TestS3_TheEventsStreamRefusesReadersOverItsBound(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	cfg := testConfig(connect(t, s.ClientURL()), "bound")
	cfg.MaxEventReaders = 1
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	ei, err := b.events.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ei.Config.MaxConsumers)

	done, err := b.Timeline("pair-done", TimelineConfig{})
	require.NoError(t, err)
	playTimeline(t, ctx, "pair-done", done, 2)
	// pair-open has one event and no terminal: a reader following it
	// holds the one place until its context ends.
	open, err := b.Timeline("pair-open", TimelineConfig{})
	require.NoError(t, err)
	l, err := eventlog.New(eventlog.Config{Name: "pair-open", MaxEvents: 8, MaxBytes: 1 << 20, Required: []eventlog.Observer{open}})
	require.NoError(t, err)
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	_, err = l.Append(ctx, eventlog.Record{Kind: "model.delta", Time: time.Now(), Payload: raw})
	require.NoError(t, err)
	require.NoError(t, open.Flush(ctx))

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan struct{})
	following := make(chan error, 1)
	go func() {
		var last error
		for _, err := range b.Events(fctx, "pair-open", 0, true) {
			if err != nil {
				last = err
				break
			}
			close(first)
		}
		following <- last
	}()
	<-first
	_, err = collect(t, ctx, b, "pair-done", 0, false)
	require.ErrorIs(t, err, jetstream.ErrMaximumConsumersLimit)
	cancel()
	require.ErrorIs(t, <-following, context.Canceled)
	n, _ := consumers(t, ctx, b)
	require.Zero(t, n)
	got, err := collect(t, ctx, b, "pair-done", 0, false)
	require.NoError(t, err)
	require.Len(t, got, 2)

	_, err = Open(ctx, Config{Conn: cfg.Conn, Name: "neg", MaxEventReaders: -1})
	require.Error(t, err)
}

// TestS3_FollowingAPairReadsOnlyWhatIsNew: a PairReader's calls return
// each event once, and a call when nothing is new reads two messages
// (the status and the subject's last message), not the timeline again:
// following an N-event pair reads O(N) messages, not O(N) a poll.
func TestS3_FollowingAPairReadsOnlyWhatIsNew(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	nc := connect(t, s.ClientURL())
	b, err := Open(ctx, testConfig(nc, "follow"))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "pair-1", Spec: []byte("x")})
	require.NoError(t, err)
	pub, err := b.Timeline("pair-1", TimelineConfig{Batch: 1})
	require.NoError(t, err)
	l, err := eventlog.New(eventlog.Config{Name: "pair-1", MaxEvents: 1 << 10, MaxBytes: 1 << 20, Required: []eventlog.Observer{pub}})
	require.NoError(t, err)
	play := func(n int, terminal bool) {
		t.Helper()
		for i := range n {
			kind, end := "model.delta", terminal && i == n-1
			if end {
				kind = orchestrator.KindCompleted
			}
			raw, err := eventlog.NewRaw([]byte(`{}`))
			require.NoError(t, err)
			_, err = l.Append(ctx, eventlog.Record{Kind: kind, Time: time.Now(), Terminal: end, Payload: raw})
			require.NoError(t, err)
		}
		require.NoError(t, pub.Flush(ctx))
	}
	seqs := func(rec store.PairRecord) []uint64 {
		var s []uint64
		for _, en := range rec.Events {
			s = append(s, en.Event.Seq())
		}
		return s
	}
	span := func(from, to uint64) []uint64 {
		var s []uint64
		for i := from; i <= to; i++ {
			s = append(s, i)
		}
		return s
	}

	read := b.PairReader("pair-1")
	rec, err := read(ctx)
	require.NoError(t, err)
	require.Empty(t, rec.Events)
	require.Equal(t, StatusQueued, rec.Summary.Status)
	play(100, false)
	rec, err = read(ctx)
	require.NoError(t, err)
	require.Equal(t, span(1, 100), seqs(rec))

	const polls = 20
	before := nc.Stats().InMsgs
	for range polls {
		rec, err := read(ctx)
		require.NoError(t, err)
		require.Empty(t, rec.Events)
	}
	require.Equal(t, uint64(2*polls), nc.Stats().InMsgs-before, "messages read by idle polls")

	play(5, false)
	rec, err = read(ctx)
	require.NoError(t, err)
	require.Equal(t, span(101, 105), seqs(rec))
	require.Equal(t, StatusQueued, rec.Summary.Status)
	play(1, true)
	require.NoError(t, l.Close(ctx))
	rec, err = read(ctx)
	require.NoError(t, err)
	require.Equal(t, span(106, 106), seqs(rec))
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
	rec, err = read(ctx)
	require.NoError(t, err)
	require.Empty(t, rec.Events)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status, "the terminal read before still says how the pair ended")

	full, err := b.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Equal(t, span(1, 106), seqs(full))
}

// TestS3_ListingPairsIsOneReadNotOneAKey: a listing reads every status
// in one stream of messages, sending a handful of requests whatever the
// number of jobs, and returns the newest within its limit.
func TestS3_ListingPairsIsOneReadNotOneAKey(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	nc := connect(t, s.ClientURL())
	b, err := Open(ctx, testConfig(nc, "list"))
	require.NoError(t, err)
	const jobs = 300
	for i := range jobs {
		_, err := b.Submit(ctx, job.Job{ID: fmt.Sprintf("pair-%03d", i), Spec: []byte("x")})
		require.NoError(t, err)
	}
	require.NoError(t, b.Cancel(ctx, "pair-298"))

	before := nc.Stats().OutMsgs
	got, err := b.ListPairs(ctx, store.ListOptions{Limit: 5})
	require.NoError(t, err)
	sent := nc.Stats().OutMsgs - before
	t.Logf("requests sent to list %d jobs: %d", jobs, sent)
	require.LessOrEqual(t, sent, uint64(8))
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
	}
	require.Equal(t, []string{"pair-299", "pair-298", "pair-297", "pair-296", "pair-295"}, ids)

	got, err = b.ListPairs(ctx, store.ListOptions{Status: store.StatusCancelled})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "pair-298", got[0].ID)

	var queued, want []string
	for st, err := range b.Statuses(ctx, job.Queued) {
		require.NoError(t, err)
		queued = append(queued, st.ID)
	}
	for i := range jobs {
		if i != 298 {
			want = append(want, fmt.Sprintf("pair-%03d", i))
		}
	}
	require.Equal(t, want, queued, "in submission order")
}
