package jetstream

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// playTimeline appends n events to a log whose required observer is pub,
// the last one the pair's terminal, and returns the log's events.
func playTimeline(t testing.TB, ctx context.Context, pairID string, pub eventlog.Observer, n int) []eventlog.Event {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Name: pairID, MaxEvents: 1 << 16, MaxBytes: 64 << 20, Required: []eventlog.Observer{pub}})
	require.NoError(t, err)
	var evs []eventlog.Event
	for i := 1; i <= n; i++ {
		kind := "model.delta"
		if i == n {
			kind = orchestrator.KindCompleted
		}
		raw, err := eventlog.NewRaw([]byte(`{"i":` + strconv.Itoa(i) + `}`))
		require.NoError(t, err)
		e, err := l.Append(ctx, eventlog.Record{Kind: kind, Time: time.Now(), Terminal: i == n, Payload: raw})
		require.NoError(t, err)
		evs = append(evs, e)
	}
	require.NoError(t, l.Close(ctx))
	return evs
}

// collect reads the pair's timeline after the cursor.
func collect(t *testing.T, ctx context.Context, b *Backend, pairID string, after uint64, follow bool) ([]string, error) {
	var got []string
	for e, err := range b.Events(ctx, pairID, after, follow) {
		if err != nil {
			return got, err
		}
		got = append(got, string(e.AppendJSON(nil)))
	}
	return got, nil
}

func encoded(evs []eventlog.Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.AppendJSON(nil)))
	}
	return s
}

// TestS1_TimelineOnJetStreamGapFreeFromAnyCursor: a reader attached before the pair
// starts tails it to its terminal, readers from any cursor afterwards get
// exactly the events after it, and a batch published twice, or one that
// overlaps another, yields each event once.
func TestS1_TimelineOnJetStreamGapFreeFromAnyCursor(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "tl"))
	require.NoError(t, err)

	const n = 100
	tailed := make(chan []string, 1)
	go func() {
		got, _ := collect(t, ctx, b, "pair-1", 0, true)
		tailed <- got
	}()
	pub, err := b.Timeline("pair-1", TimelineConfig{Batch: 8, Linger: time.Millisecond})
	require.NoError(t, err)
	evs := playTimeline(t, ctx, "pair-1", pub, n)
	require.Equal(t, encoded(evs), <-tailed)

	// Publish a batch again as it was, and one overlapping two batches.
	for _, rng := range [][2]int{{1, 8}, {5, 12}} {
		msg := nats.NewMsg(b.eventsSubject("pair-1"))
		msg.Header.Set(nats.MsgIdHdr, "pair-1."+strconv.Itoa(rng[0])+"-"+strconv.Itoa(rng[1]))
		for _, e := range evs[rng[0]-1 : rng[1]] {
			msg.Data = append(e.AppendJSON(msg.Data), '\n')
		}
		_, err := b.js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
	for _, after := range []uint64{0, 1, 7, 8, 37, 99, 100} {
		for _, follow := range []bool{false, true} {
			got, err := collect(t, ctx, b, "pair-1", after, follow)
			require.NoError(t, err, "after %d", after)
			require.Equal(t, encoded(evs[after:]), got, "after %d follow %v", after, follow)
		}
	}
	_, err = collect(t, ctx, b, "pair-none", 0, false)
	require.ErrorIs(t, err, job.ErrNotFound)
}

// TestS1_TimelineOnJetStreamGapIsAnError: when the stream's per-pair limit has let
// the oldest events go, a reader from before them gets ErrGap, never a
// timeline with a hole; a reader after them is served.
func TestS1_TimelineOnJetStreamGapIsAnError(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	cfg := testConfig(connect(t, s.ClientURL()), "gap")
	cfg.MaxPairEvents = 2
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	// A linger longer than the test makes the batches full ones only, so
	// the cut falls between events 8 and 9 however slow the machine is.
	pub, err := b.Timeline("pair-1", TimelineConfig{Batch: 4, Linger: time.Hour})
	require.NoError(t, err)
	evs := playTimeline(t, ctx, "pair-1", pub, 16) // 4 messages; the first 2 are gone
	_, err = collect(t, ctx, b, "pair-1", 0, false)
	require.ErrorIs(t, err, ErrGap)
	got, err := collect(t, ctx, b, "pair-1", 8, false)
	require.NoError(t, err)
	require.Equal(t, encoded(evs[8:]), got)
}

// TestS1_TimelineOnJetStreamRefusesOutOfSequence: the publisher never sends a
// timeline with a hole.
func TestS1_TimelineOnJetStreamRefusesOutOfSequence(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "seq"))
	require.NoError(t, err)
	_, err = b.Timeline("pair-1", TimelineConfig{Batch: MaxBatch + 1})
	require.Error(t, err)
	pub, err := b.Timeline("pair-1", TimelineConfig{})
	require.NoError(t, err)
	evs := playTimeline(t, ctx, "src", eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }), 3)
	require.NoError(t, pub.Observe(ctx, evs[0]))
	require.Error(t, pub.Observe(ctx, evs[2]))
	require.NoError(t, pub.Flush(ctx))
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"seq":1,"kind":"a","time":"2026-01-01T00:00:00Z","payload":{}}` + "\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := decodeBatch(b)
		if err != nil {
			return
		}
		require.NotEmpty(t, evs)
		for i := 1; i < len(evs); i++ {
			require.Equal(t, evs[i-1].Seq()+1, evs[i].Seq())
		}
	})
}

// FuzzSuperseded: a reader's attempt header is a positive decimal of at
// most 20 digits, or ErrBadBatch; a message names a superseded attempt
// only when an earlier one named a higher attempt.
func FuzzSuperseded(f *testing.F) {
	f.Add("1", "2")
	f.Add("2", "1")
	f.Add("", "x")
	f.Add("0", "18446744073709551616")
	f.Fuzz(func(t *testing.T, a, b string) {
		var seen attempts
		var newest uint64
		for _, v := range []string{a, b} {
			stale, err := seen.superseded(nats.Header{attemptHdr: []string{v}})
			n, perr := strconv.ParseUint(v, 10, 64)
			switch {
			case v == "":
				require.NoError(t, err)
				require.False(t, stale)
			case perr != nil || n == 0 || len(v) > maxAttemptDigits:
				require.ErrorIs(t, err, ErrBadBatch)
			default:
				require.NoError(t, err)
				require.Equal(t, n < newest, stale)
				newest = max(newest, n)
			}
		}
	})
}

// BenchmarkTimelineBatch publishes scripted pairs' timelines of 60
// events each, one message per event or batched, and reports events/s.
func BenchmarkTimelineBatch(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			s, err := StartEmbedded(EmbeddedConfig{Dir: b.TempDir()})
			require.NoError(b, err)
			defer func() { s.Shutdown(); s.WaitForShutdown() }()
			nc, err := nats.Connect(s.ClientURL())
			require.NoError(b, err)
			defer nc.Close()
			be, err := Open(ctx, Config{Conn: nc, Name: "bench"})
			require.NoError(b, err)
			src := playTimeline(b, ctx, "src", eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }), 60)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				pub, err := be.Timeline("pair-"+strconv.Itoa(i), TimelineConfig{Batch: batch})
				require.NoError(b, err)
				for _, e := range src {
					require.NoError(b, pub.Observe(ctx, e))
				}
			}
			b.ReportMetric(float64(b.N*60)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestS1_HistoryEndsWithThePairsTimeline: a pair whose terminal is on the
// events stream reads as ended even before its worker has written the
// job's terminal status, with the status its terminal says, so that a
// reader that stops at the terminal (serve's streams) never reports it
// still running.
func TestS1_HistoryEndsWithThePairsTimeline(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	b, err := Open(ctx, testConfig(connect(t, s.ClientURL()), "hist"))
	require.NoError(t, err)
	_, err = b.Submit(ctx, job.Job{ID: "pair-1", Spec: []byte("x")})
	require.NoError(t, err)
	pub, err := b.Timeline("pair-1", TimelineConfig{})
	require.NoError(t, err)
	playTimeline(t, ctx, "pair-1", pub, 5)
	rec, err := b.Pair(ctx, "pair-1")
	require.NoError(t, err)
	require.Len(t, rec.Events, 5)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
}

// TestS1_ABurstPastTheInFlightBoundWaits: more pairs publish at once than
// the backend lets acks be in flight (MaxPending), and the acks are slow
// to come: the pair that finds no room waits for it, past the stall
// that nats.go allows a publication, instead of failing. Every pair's
// terminal is stored.
func TestS1_ABurstPastTheInFlightBoundWaits(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	px := startProxy(t, s.Addr().String())
	cfg := testConfig(connect(t, px.url()), "burst")
	cfg.MaxPending = 2
	b, err := Open(ctx, cfg)
	require.NoError(t, err)
	stalled := make(chan struct{}, 1)
	b.onStall = func() {
		select {
		case stalled <- struct{}{}:
		default:
		}
	}
	const pairs = 3
	px.holdFrom(toClient)
	done := make(chan error, pairs)
	for i := range pairs {
		pub, err := b.Timeline("pair-burst-"+strconv.Itoa(i), TimelineConfig{})
		require.NoError(t, err)
		e := terminalEvent(t, ctx)
		go func() { done <- pub.Observe(ctx, e) }()
	}
	select {
	case <-stalled:
	case err := <-done:
		t.Fatalf("a pair ended while the acks were held: %v", err)
	case <-ctx.Done():
		t.Fatal("no publication waited for room")
	}
	px.release()
	for range pairs {
		require.NoError(t, <-done)
	}
	for i := range pairs {
		kinds, err := collect(t, ctx, b, "pair-burst-"+strconv.Itoa(i), 0, false)
		require.NoError(t, err)
		require.Len(t, kinds, 1)
	}
}
