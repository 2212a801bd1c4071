package eventlog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// recorder is an observer that records the sequences it sees.
type recorder struct {
	mu   sync.Mutex
	seqs []uint64
	fail func(eventlog.Event) error // optional
}

func (r *recorder) Observe(_ context.Context, e eventlog.Event) error {
	r.mu.Lock()
	r.seqs = append(r.seqs, e.Seq())
	r.mu.Unlock()
	if r.fail != nil {
		return r.fail(e)
	}
	return nil
}

func (r *recorder) seen() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs...)
}

// K16: when a required observer is told, the event is already committed:
// visible in stats and to a subscriber, without waiting.
func TestCommitBeforeRequiredObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l *eventlog.Log
		var problems []string
		obs := eventlog.ObserverFunc(func(ctx context.Context, e eventlog.Event) error {
			if l.Stats().LastSeq != e.Seq() {
				problems = append(problems, "stats do not show the event yet")
			}
			s, err := l.Subscribe(ctx, e.Seq()-1)
			if err != nil {
				problems = append(problems, err.Error())
				return nil
			}
			defer s.Close()
			start := time.Now()
			soon, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			got, err := s.Next(soon)
			if err != nil || got.Seq() != e.Seq() || time.Since(start) != 0 {
				problems = append(problems, "a subscriber cannot read the event at once")
			}
			return nil
		})
		l = newLog(t, eventlog.Config{Required: []eventlog.Observer{obs}})
		appendN(t, l, 5)
		require.Empty(t, problems)
	})
}

// K16/K17: required observers are told in configuration order and see
// sequences in order, even with concurrent appenders.
func TestRequiredObserversInOrderUnderConcurrency(t *testing.T) {
	type call struct {
		obs int
		seq uint64
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	mk := func(i int) eventlog.Observer {
		return eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
			mu.Lock()
			calls = append(calls, call{i, e.Seq()})
			mu.Unlock()
			return nil
		})
	}
	l := newLog(t, eventlog.Config{Required: []eventlog.Observer{mk(0), mk(1)}})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { appendN(t, l, 100) })
	}
	wg.Wait()
	var want []call
	for s := uint64(1); s <= 400; s++ {
		want = append(want, call{0, s}, call{1, s})
	}
	require.Equal(t, want, calls)
}

var errStore = errors.New("store unavailable")

// K16: a failing required observer does not un-commit or reuse the
// sequence; the caller reports the failure with a later event, and
// best-effort observers never see the event the required observer refused.
func TestObserverFailureConsumesSequenceAndIsReportedLater(t *testing.T) {
	ctx := context.Background()
	required := &recorder{fail: func(e eventlog.Event) error {
		if e.Seq() == 2 {
			return errStore
		}
		return nil
	}}
	later := &recorder{}
	best := &recorder{}
	l := newLog(t, eventlog.Config{
		Required:   []eventlog.Observer{eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }), required, later},
		BestEffort: []eventlog.Observer{best},
	})

	appendN(t, l, 1)
	e, err := l.Append(ctx, rec(2))
	var oe *eventlog.ObserverError
	require.ErrorAs(t, err, &oe)
	require.ErrorIs(t, err, errStore)
	require.Equal(t, uint64(2), oe.Seq)
	require.Equal(t, 1, oe.Observer)
	require.Equal(t, uint64(2), e.Seq(), "the committed event is returned with the error")

	// The caller (the engine) reports the failure with one later event.
	failed, err := l.Append(ctx, eventlog.Record{Kind: "test.failed", Time: t0, Terminal: true, Payload: note{N: int64(oe.Seq)}})
	require.NoError(t, err)
	require.Equal(t, uint64(3), failed.Seq(), "sequence 2 is never reused")

	require.NoError(t, l.Close(ctx))
	require.Equal(t, []uint64{1, 2, 3}, retained(t, l))
	require.Equal(t, []uint64{1, 2, 3}, required.seen())
	require.Equal(t, []uint64{1, 3}, later.seen(), "observers after the failing one skip its event")
	require.Equal(t, []uint64{1, 3}, best.seen(), "best-effort observers are told only after required ones accept")
	require.Equal(t, uint64(1), l.Stats().ObserverFailures)
	require.Equal(t, uint64(1), l.Stats().BestEffortDrops, "the withheld event counts as dropped for the best-effort observer (K20)")

	kinds := map[string]int{}
	s, err := l.Subscribe(ctx, 0)
	require.NoError(t, err)
	for e, err := range s.All(ctx) {
		require.NoError(t, err)
		kinds[e.Kind()]++
	}
	require.Equal(t, 1, kinds["test.failed"])
}

// K16/K25: a panicking observer becomes a typed, secret-free error; the
// event stays committed and the log keeps working. A best-effort panic is
// contained and counted.
func TestObserverPanicIsContained(t *testing.T) {
	ctx := context.Background()
	boom := func(_ context.Context, e eventlog.Event) error {
		if e.Seq() == 1 {
			panic("secret-token-123")
		}
		return nil
	}
	best := &recorder{}
	l := newLog(t, eventlog.Config{
		Required:   []eventlog.Observer{eventlog.ObserverFunc(boom)},
		BestEffort: []eventlog.Observer{eventlog.ObserverFunc(boom), best},
	})
	e, err := l.Append(ctx, rec(1))
	require.ErrorIs(t, err, eventlog.ErrObserverPanic)
	require.NotContains(t, err.Error(), "secret")
	require.Equal(t, uint64(1), e.Seq())

	// A best-effort panic: make the required observer accept event 2 only.
	e, err = l.Append(ctx, rec(2))
	require.NoError(t, err)
	require.Equal(t, uint64(2), e.Seq())
	require.NoError(t, l.Close(ctx))
	require.Equal(t, []uint64{2}, best.seen())
	st := l.Stats()
	require.Equal(t, uint64(1), st.ObserverFailures)
	require.Equal(t, uint64(0), st.BestEffortFailures, "event 1 never reached best-effort observers")
}

func TestBestEffortPanicIsCounted(t *testing.T) {
	ctx := context.Background()
	best := &recorder{}
	l := newLog(t, eventlog.Config{BestEffort: []eventlog.Observer{
		eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { panic("x") }), best,
	}})
	appendN(t, l, 3)
	require.NoError(t, l.Close(ctx))
	require.Equal(t, []uint64{1, 2, 3}, best.seen())
	require.Equal(t, uint64(3), l.Stats().BestEffortFailures)
}

// K17: a required observer applies backpressure by blocking; the event it
// is told about is already committed, and a later appender waiting behind
// it can give up with its context without consuming a sequence.
func TestRequiredObserverBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		obs := eventlog.ObserverFunc(func(ctx context.Context, e eventlog.Event) error {
			if e.Seq() == 1 {
				<-gate
			}
			return nil
		})
		l := newLog(t, eventlog.Config{Required: []eventlog.Observer{obs}})
		first := make(chan error, 1)
		go func() {
			_, err := l.Append(context.Background(), rec(1))
			first <- err
		}()
		synctest.Wait()
		require.Equal(t, uint64(1), l.Stats().LastSeq, "committed before the observer returns")
		select {
		case <-first:
			t.Fatal("Append returned while its required observer blocks")
		default:
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := l.Append(ctx, rec(2))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, uint64(1), l.Stats().LastSeq, "the appender that gave up committed nothing")

		close(gate)
		require.NoError(t, <-first)
		e, err := l.Append(context.Background(), rec(3))
		require.NoError(t, err)
		require.Equal(t, uint64(2), e.Seq())
	})
}

// K17: a blocked best-effort observer never slows appends; what does not fit
// its mailbox is dropped and counted; what was queued is delivered on Close.
func TestBestEffortDropsCountedWithoutBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		best := &recorder{}
		blocking := eventlog.ObserverFunc(func(ctx context.Context, e eventlog.Event) error {
			if e.Seq() == 1 {
				<-gate
			}
			return best.Observe(ctx, e)
		})
		l := newLog(t, eventlog.Config{BestEffort: []eventlog.Observer{blocking}, Mailbox: 2})
		t.Cleanup(func() { // runs before the log's Close even if the test fails
			select {
			case <-gate:
			default:
				close(gate)
			}
		})
		appendN(t, l, 1)
		synctest.Wait() // the blocking observer now holds event 1

		start := time.Now()
		appendN(t, l, 99)
		require.Zero(t, time.Since(start), "appends never waited")
		require.Equal(t, uint64(97), l.Stats().BestEffortDrops, "99 events, 2 fit the mailbox")

		close(gate)
		require.NoError(t, l.Close(context.Background()))
		require.Equal(t, []uint64{1, 2, 3}, best.seen())
	})
}

// Close gives up on a best-effort observer that blocks past ctx: it cancels
// the observer's context, counts what was never delivered, and a later Close
// finds the goroutine gone.
func TestCloseGivesUpOnBlockedBestEffort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := eventlog.ObserverFunc(func(ctx context.Context, _ eventlog.Event) error {
			<-ctx.Done()
			return ctx.Err()
		})
		l := newLog(t, eventlog.Config{BestEffort: []eventlog.Observer{stuck}, Mailbox: 4})
		appendN(t, l, 3)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.ErrorIs(t, l.Close(ctx), context.DeadlineExceeded)
		require.NoError(t, l.Close(context.Background()))
		st := l.Stats()
		require.Equal(t, uint64(2), st.BestEffortDrops, "events 2 and 3 were never delivered")
		require.Equal(t, uint64(1), st.BestEffortFailures, "event 1 was cut short")
	})
}
