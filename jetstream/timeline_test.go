package jetstream

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
			nc := connect(b, startServer(b, b.TempDir()).ClientURL())
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

// TestS1_DeltasFurtherApartThanTheLingerTravelOneAMessage: a delta that
// no other follows within the linger is published alone, as a streaming
// pair's are at 30 deltas a second (33 ms apart, the linger 20 ms), so
// such a pair sends one message a delta; deltas within the linger share
// one.
func TestS1_DeltasFurtherApartThanTheLingerTravelOneAMessage(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, t.TempDir())
	nc := connect(t, s.ClientURL())
	b, err := Open(ctx, testConfig(nc, "delta"))
	require.NoError(t, err)
	// A streaming pair's deltas come 33 ms apart: further than the linger.
	require.Less(t, DefaultLinger, time.Second/30)
	const deltas = 30
	evs := playTimeline(t, ctx, "src", eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }), deltas+1)

	// Apart: each delta is observed once the one before is on the
	// server, which the linger alone sends there.
	sub, err := nc.SubscribeSync(b.eventsSubject("apart"))
	require.NoError(t, err)
	pub, err := b.Timeline("apart", TimelineConfig{})
	require.NoError(t, err)
	for _, e := range evs[:deltas] {
		require.NoError(t, pub.Observe(ctx, e))
		_, err := sub.NextMsg(10 * time.Second)
		require.NoError(t, err)
	}
	require.NoError(t, pub.Observe(ctx, evs[deltas]))
	// Together: every delta within one linger.
	together, err := b.Timeline("together", TimelineConfig{Linger: time.Hour})
	require.NoError(t, err)
	for _, e := range evs {
		require.NoError(t, together.Observe(ctx, e))
	}

	count := func(pairID string) uint64 {
		info, err := b.events.Info(ctx, jetstream.WithSubjectFilter(b.eventsSubject(pairID)))
		require.NoError(t, err)
		return info.State.Subjects[b.eventsSubject(pairID)]
	}
	require.Equal(t, uint64(deltas+1), count("apart"), "one message a delta, and the terminal's")
	require.Equal(t, uint64(1), count("together"))
}

// BenchmarkTimelineDeltas: pairs streaming 30 deltas a second each, for
// 2 seconds (60 deltas, then the terminal), publish through their
// timeline publishers to an embedded server, their starts spread over
// one period, all on one connection (one worker holding them all); one
// subscriber hears every message. Reported: messages per event,
// messages/s, the median and p99 of the time from an event's Observe to
// the subscriber's receipt of it (what a reader of the stream waits),
// and the pairs whose publisher failed (a publish that found
// Config.MaxPending acks in flight for nats.go's stall wait), by pairs
// and linger.
func BenchmarkTimelineDeltas(b *testing.B) {
	const deltas, period = 60, time.Second / 30
	for _, pairs := range []int{100, 500} {
		for _, linger := range []time.Duration{DefaultLinger, 100 * time.Millisecond} {
			b.Run("pairs="+strconv.Itoa(pairs)+"/linger="+linger.String(), func(b *testing.B) {
				ctx := context.Background()
				nc := connect(b, startServer(b, b.TempDir()).ClientURL())
				be, err := Open(ctx, Config{Conn: nc, Name: "bench"})
				require.NoError(b, err)
				src := playTimeline(b, ctx, "src", eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }), deltas+1)

				// Pair n is pair n%pairs of round n/pairs; observed[n%pairs]
				// [seq-1] is when its event seq was observed, in ns since
				// base.
				observed := make([][]atomic.Int64, pairs)
				for i := range observed {
					observed[i] = make([]atomic.Int64, len(src))
				}
				base := time.Now()
				var mu sync.Mutex
				var lat []time.Duration
				var msgs, events int
				sub, err := nc.Subscribe(be.eventsSubject("*"), func(m *nats.Msg) {
					now := time.Since(base)
					n, err := strconv.Atoi(strings.TrimPrefix(m.Subject, be.eventsSubject("p")))
					if err != nil {
						b.Error(err)
						return
					}
					evs, err := decodeBatch(m.Data)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					msgs++
					for _, e := range evs {
						events++
						lat = append(lat, now-time.Duration(observed[n%pairs][e.Seq()-1].Load()))
					}
				})
				require.NoError(b, err)
				defer func() { _ = sub.Unsubscribe() }()
				rounds := 0
				var failed atomic.Int64
				for b.Loop() {
					var wg sync.WaitGroup
					for i := range pairs {
						wg.Go(func() {
							pub, err := be.Timeline("p"+strconv.Itoa(rounds*pairs+i), TimelineConfig{Linger: linger})
							if err != nil {
								b.Error(err)
								return
							}
							<-time.After(period * time.Duration(i) / time.Duration(pairs))
							tick := time.NewTicker(period)
							defer tick.Stop()
							for j, e := range src {
								if j > 0 {
									<-tick.C
								}
								observed[i][j].Store(int64(time.Since(base)))
								if err := pub.Observe(ctx, e); err != nil {
									// Counted, not fatal: how many pairs a
									// connection fails at a load is what
									// the benchmark is for.
									failed.Add(1)
									return
								}
							}
						})
					}
					wg.Wait()
					rounds++
					// Every batch is stored (the terminal waits for it);
					// a round trip makes sure the subscriber heard them.
					require.NoError(b, nc.Flush())
				}
				mu.Lock()
				defer mu.Unlock()
				if failed.Load() == 0 {
					require.Equal(b, rounds*pairs*len(src), events)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(msgs)/float64(events), "msgs/event")
				b.ReportMetric(float64(msgs)/(float64(rounds*len(src))*period.Seconds()), "msgs/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1e3, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms")
				b.ReportMetric(float64(failed.Load())/float64(rounds), "failed-pairs")
			})
		}
	}
}
