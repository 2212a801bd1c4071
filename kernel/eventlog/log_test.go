package eventlog_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

func TestNewValidatesConfig(t *testing.T) {
	ok := eventlog.Config{MaxEvents: 10, MaxBytes: 1000}
	for name, mut := range map[string]func(*eventlog.Config){
		"no max events":       func(c *eventlog.Config) { c.MaxEvents = 0 },
		"no max bytes":        func(c *eventlog.Config) { c.MaxBytes = 0 },
		"reserve all events":  func(c *eventlog.Config) { c.ReserveEvents = 10 },
		"negative reserve":    func(c *eventlog.Config) { c.ReserveEvents = -1 },
		"reserve all bytes":   func(c *eventlog.Config) { c.ReserveBytes = 1000 },
		"negative lag":        func(c *eventlog.Config) { c.MaxLag = -1 },
		"negative mailbox":    func(c *eventlog.Config) { c.Mailbox = -1 },
		"negative capacity":   func(c *eventlog.Config) { c.Capacity = -1 },
		"nil required":        func(c *eventlog.Config) { c.Required = []eventlog.Observer{nil} },
		"nil best effort obs": func(c *eventlog.Config) { c.BestEffort = []eventlog.Observer{nil} },
	} {
		cfg := ok
		mut(&cfg)
		_, err := eventlog.New(cfg)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
	l, err := eventlog.New(ok)
	require.NoError(t, err)
	require.NoError(t, l.Close(context.Background()))
}

// New copies the observer slices: changing the caller's slice later changes
// nothing.
func TestNewCopiesObservers(t *testing.T) {
	var calls int
	obs := []eventlog.Observer{eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { calls++; return nil })}
	l := newLog(t, eventlog.Config{Required: obs})
	obs[0] = eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { panic("replaced") })
	appendN(t, l, 1)
	require.Equal(t, 1, calls)
}

func TestAppendValidatesRecord(t *testing.T) {
	l := newLog(t, eventlog.Config{})
	for name, r := range map[string]eventlog.Record{
		"empty kind":  {Time: t0, Payload: note{}},
		"bad kind":    {Kind: "Run Started", Time: t0, Payload: note{}},
		"zero time":   {Kind: "a.b", Payload: note{}},
		"year 10000":  {Kind: "a.b", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Payload: note{}},
		"nil payload": {Kind: "a.b", Time: t0},
		"huge":        {Kind: "a.b", Time: t0, Payload: sized(eventlog.MaxEventBytes + 1)},
		"tiny":        {Kind: "a.b", Time: t0, Payload: sized(1)},
	} {
		e, err := l.Append(context.Background(), r)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
		require.True(t, e.IsZero(), name)
	}
	// Rejected records consume no sequence.
	e, err := l.Append(context.Background(), rec(1))
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.Seq())
}

// K15: sequences start at 1 and increase by exactly one, even with many
// concurrent appenders; the log holds them in order.
func TestStrictSequenceUnderConcurrentAppenders(t *testing.T) {
	const appenders, each = 8, 250
	l := newLog(t, eventlog.Config{})
	var (
		mu   sync.Mutex
		seqs []uint64
		wg   sync.WaitGroup
	)
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				e, err := l.Append(context.Background(), rec(int64(a*each+i)))
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				seqs = append(seqs, e.Seq())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(seqs)
	require.Equal(t, seqRange(1, appenders*each), seqs)
	require.Equal(t, seqRange(1, appenders*each), retained(t, l))
}

// sized is a payload that only reports a size, to test the log's checks.
type sized int

func (sized) AppendJSON(dst []byte) []byte { return append(dst, "{}"...) }
func (s sized) EncodedLen() int            { return int(s) }

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// K18: count bound with a terminal reserve. Non-terminal events keep the log
// at MaxEvents-ReserveEvents; terminal events use the reserve without
// evicting; the next non-terminal event restores the reserve.
func TestEvictionWithTerminalReserve(t *testing.T) {
	l := newLog(t, eventlog.Config{MaxEvents: 4, MaxBytes: 1 << 20, ReserveEvents: 1})
	ctx := context.Background()
	appendN(t, l, 5)
	require.Equal(t, []uint64{3, 4, 5}, retained(t, l))
	require.Equal(t, uint64(2), l.Stats().Evictions)

	_, err := l.Append(ctx, terminal(6))
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4, 5, 6}, retained(t, l), "a terminal event uses the reserve instead of evicting")
	require.Equal(t, uint64(2), l.Stats().Evictions)

	_, err = l.Append(ctx, terminal(7))
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 5, 6, 7}, retained(t, l), "a full log evicts the oldest even for a terminal")

	_, err = l.Append(ctx, rec(8))
	require.NoError(t, err)
	require.Equal(t, []uint64{6, 7, 8}, retained(t, l), "a non-terminal event restores the reserve")
	require.Equal(t, uint64(5), l.Stats().Evictions)
}

// K18: byte bound with a byte reserve, exact to the encoded size.
func TestEvictionByEncodedBytes(t *testing.T) {
	probe := newLog(t, eventlog.Config{})
	e, err := probe.Append(context.Background(), rec(1))
	require.NoError(t, err)
	size := e.EncodedLen() // every event below has this size (one-digit sequences)

	l := newLog(t, eventlog.Config{MaxEvents: 100, MaxBytes: 4 * size, ReserveBytes: size})
	appendN(t, l, 5)
	st := l.Stats()
	require.Equal(t, 3, st.RetainedEvents)
	require.Equal(t, 3*size, st.RetainedBytes)
	require.Equal(t, uint64(3), st.FirstSeq)

	_, err = l.Append(context.Background(), terminal(6))
	require.NoError(t, err)
	st = l.Stats()
	require.Equal(t, 4*size+0, st.RetainedBytes, "terminal fills the byte reserve")
	require.Equal(t, uint64(3), st.FirstSeq)
	require.Equal(t, uint64(2), st.Evictions)
}

// K18: an event that cannot fit even in an empty log is refused with a
// typed error and consumes no sequence; a terminal may use the reserve.
func TestAppendTooLargeDoesNotCommit(t *testing.T) {
	probe := newLog(t, eventlog.Config{})
	e, err := probe.Append(context.Background(), rec(1))
	require.NoError(t, err)
	size := e.EncodedLen()

	l := newLog(t, eventlog.Config{MaxEvents: 10, MaxBytes: size + 10, ReserveBytes: 20})
	_, err = l.Append(context.Background(), rec(1))
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.ErrorIs(t, err, bound.ErrExceeded)
	require.Equal(t, "event", be.Field)
	require.Equal(t, size-10, be.Limit)
	require.Equal(t, size, be.Got)

	e, err = l.Append(context.Background(), terminal(1))
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.Seq(), "the refused append consumed no sequence")
	st := l.Stats()
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, []uint64{1}, retained(t, l))
}

// A log that has committed sequence MaxUint64 refuses further appends
// with a typed error and commits nothing: a sequence never wraps to 0 and
// is never reused (K15).
func TestAppendPastTheLastSequenceFails(t *testing.T) {
	l := newLog(t, eventlog.Config{After: math.MaxUint64 - 1})
	e, err := l.Append(context.Background(), rec(1))
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxUint64), e.Seq())

	e, err = l.Append(context.Background(), terminal(2))
	require.Zero(t, e)
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "event.seq", be.Field)
	st := l.Stats()
	require.Equal(t, uint64(math.MaxUint64), st.LastSeq)
	require.Equal(t, uint64(1), st.Rejected)
	require.Equal(t, []uint64{math.MaxUint64}, retained(t, l))

	full := newLog(t, eventlog.Config{After: math.MaxUint64})
	_, err = full.Append(context.Background(), rec(1))
	require.ErrorAs(t, err, &be)
	require.Zero(t, full.Stats().RetainedEvents)
}

func TestAppendAfterCloseFails(t *testing.T) {
	l := newLog(t, eventlog.Config{})
	appendN(t, l, 1)
	require.NoError(t, l.Close(context.Background()))
	require.NoError(t, l.Close(context.Background()), "Close is idempotent")
	_, err := l.Append(context.Background(), rec(2))
	require.ErrorIs(t, err, eventlog.ErrClosed)
	require.Equal(t, uint64(1), l.Stats().LastSeq)
}

// K20: stats report retention, eviction, out-of-range, exhaustion and slow
// disconnects.
func TestStatsReportHealth(t *testing.T) {
	l := newLog(t, eventlog.Config{MaxEvents: 5, MaxBytes: 1 << 20, MaxLag: 3})
	ctx := context.Background()
	require.Equal(t, eventlog.Stats{FirstSeq: 1}, l.Stats())

	appendN(t, l, 1)
	slow, err := l.Subscribe(ctx, 0)
	require.NoError(t, err)
	_, err = slow.Next(ctx)
	require.NoError(t, err)
	appendN(t, l, 4) // last 5, retained 1..5: slow is 4 behind
	_, err = slow.Next(ctx)
	require.ErrorIs(t, err, eventlog.ErrExhausted)

	evicted, err := l.Subscribe(ctx, 2)
	require.NoError(t, err)
	appendN(t, l, 4) // last 9, retained 5..9: event 3 is gone
	_, err = evicted.Next(ctx)
	require.ErrorIs(t, err, eventlog.ErrExhausted)
	_, err = l.Subscribe(ctx, 1)
	require.ErrorIs(t, err, eventlog.ErrOutOfRange)

	st := l.Stats()
	require.Equal(t, 5, st.RetainedEvents)
	require.Positive(t, st.RetainedBytes)
	require.Equal(t, uint64(5), st.FirstSeq)
	require.Equal(t, uint64(9), st.LastSeq)
	require.Equal(t, uint64(4), st.Evictions)
	require.Equal(t, uint64(1), st.Exhaustions)
	require.Equal(t, uint64(1), st.SlowDisconnects)
	require.Equal(t, uint64(1), st.OutOfRange)
}

func TestEventsCarryTheLogName(t *testing.T) {
	var seen []string
	l, err := eventlog.New(eventlog.Config{MaxEvents: 8, MaxBytes: 4096, Name: "run-7", After: 41,
		Required: []eventlog.Observer{eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
			seen = append(seen, e.Log())
			return nil
		})}})
	require.NoError(t, err)
	e, err := l.Append(context.Background(), eventlog.Record{Kind: "x.started", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Payload: mustRawForName(t)})
	require.NoError(t, err)
	require.Equal(t, "run-7", e.Log())
	require.Equal(t, uint64(42), e.Seq(), "After continues the sequence")
	require.Equal(t, []string{"run-7"}, seen)
	require.NoError(t, l.Close(context.Background()))

	_, err = eventlog.New(eventlog.Config{MaxEvents: 8, MaxBytes: 4096, Name: "bad name"})
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func mustRawForName(t *testing.T) eventlog.Raw {
	r, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	return r
}

// The ring keeps events in a compact form; a replayed event must be exactly
// the Event that Append returned, whatever its time (K15, K19): the edges
// of the valid years, nanoseconds, a monotonic reading and another zone.
func TestReplayedEventEqualsAppended(t *testing.T) {
	l := newLog(t, eventlog.Config{Name: "log-1"})
	times := []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 3, 4, 5, 6, 7, 1, time.FixedZone("x", -7*3600)),
		time.Now(), // carries a monotonic reading
	}
	var appended []eventlog.Event
	for i, tm := range times {
		e, err := l.Append(context.Background(), eventlog.Record{Kind: "test.note", Time: tm, Terminal: i%2 == 0, Payload: note{N: int64(i)}})
		require.NoError(t, err)
		appended = append(appended, e)
	}
	sub, err := l.Subscribe(context.Background(), 0)
	require.NoError(t, err)
	defer sub.Close()
	for i, want := range appended {
		got, err := sub.Next(context.Background())
		require.NoError(t, err)
		require.Equal(t, want, got, "event %d", i)
		require.True(t, got.Time().Equal(times[i]))
		require.Equal(t, "log-1", got.Log())
		require.Equal(t, string(want.AppendJSON(nil)), string(got.AppendJSON(nil)))
		require.Equal(t, want.EncodedLen(), len(got.AppendJSON(nil)))
	}
}

// Capacity is only a hint: whatever it is, the same appends retain and
// replay the same events, with the same evictions (K18).
func TestCapacityNeverChangesRetention(t *testing.T) {
	replay := func(capacity int) ([]string, eventlog.Stats) {
		l := newLog(t, eventlog.Config{MaxEvents: 20, ReserveEvents: 2, Capacity: capacity})
		for i := range 50 {
			r := rec(int64(i))
			if i%7 == 0 {
				r = terminal(int64(i))
			}
			_, err := l.Append(context.Background(), r)
			require.NoError(t, err)
		}
		sub, err := l.Subscribe(context.Background(), l.Stats().FirstSeq-1)
		require.NoError(t, err)
		defer sub.Close()
		var got []string
		for range l.Stats().RetainedEvents {
			e, err := sub.Next(context.Background())
			require.NoError(t, err)
			got = append(got, string(e.AppendJSON(nil)))
		}
		return got, l.Stats()
	}
	want, wantStats := replay(0)
	require.NotEmpty(t, want)
	require.NotZero(t, wantStats.Evictions, "the ring wrapped and evicted")
	for _, c := range []int{1, 3, 16, 20, 1000} {
		got, st := replay(c)
		require.Equal(t, want, got, "capacity %d", c)
		require.Equal(t, wantStats, st, "capacity %d", c)
	}
}
