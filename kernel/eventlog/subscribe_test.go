package eventlog_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// readUntil reads s until it delivers seq last and checks that the events
// follow from after without gap or duplicate.
func readUntil(s *eventlog.Subscription, after, last uint64) error {
	want := after + 1
	for want <= last {
		e, err := s.Next(context.Background())
		if err != nil {
			return err
		}
		if e.Seq() != want {
			return errors.New("gap or duplicate")
		}
		want++
	}
	return nil
}

// K19: Subscribe at every cursor from 0 to last+1 while appends continue:
// every valid cursor replays and then tails without gap or duplicate, and
// last+1 is out of range.
func TestSubscribeEveryCursorGapFreeUnderConcurrentAppends(t *testing.T) {
	const prefilled, more = 20, 300
	const last = prefilled + more
	l := newLog(t, eventlog.Config{})
	appendN(t, l, prefilled)
	ctx := context.Background()

	type sub struct {
		s     *eventlog.Subscription
		after uint64
	}
	var subs []sub
	for c := uint64(0); c <= prefilled+1; c++ {
		s, err := l.Subscribe(ctx, c)
		if c == prefilled+1 {
			var oe *eventlog.OutOfRangeError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, eventlog.OutOfRangeError{LastDelivered: prefilled + 1, Recovery: prefilled}, *oe)
			continue
		}
		require.NoError(t, err)
		subs = append(subs, sub{s, c})
	}

	var wg sync.WaitGroup
	errs := make(chan error, 2*len(subs)+1)
	wg.Go(func() {
		for i := range more {
			if _, err := l.Append(ctx, rec(int64(i))); err != nil {
				errs <- err
				return
			}
		}
	})
	for _, s := range subs {
		wg.Go(func() { errs <- readUntil(s.s, s.after, last) })
	}
	// Subscribe again at the moving tail while appends run.
	for range len(subs) {
		c := l.Stats().LastSeq
		s, err := l.Subscribe(ctx, c)
		require.NoError(t, err)
		wg.Go(func() { errs <- readUntil(s, c, last) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// K19: cursors outside the window get *OutOfRangeError with the last
// delivered cursor and a recovery cursor that works.
func TestSubscribeOutOfRangeRecovery(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, eventlog.Config{MaxEvents: 5, MaxBytes: 1 << 20})
	appendN(t, l, 10) // retained 6..10
	for cursor, want := range map[uint64]eventlog.OutOfRangeError{
		0:  {LastDelivered: 0, Recovery: 5},
		4:  {LastDelivered: 4, Recovery: 5},
		11: {LastDelivered: 11, Recovery: 10},
		99: {LastDelivered: 99, Recovery: 10},
	} {
		_, err := l.Subscribe(ctx, cursor)
		require.ErrorIs(t, err, eventlog.ErrOutOfRange)
		var oe *eventlog.OutOfRangeError
		require.ErrorAs(t, err, &oe)
		require.Equal(t, want, *oe, cursor)
		s, err := l.Subscribe(ctx, oe.Recovery)
		require.NoError(t, err, "the recovery cursor is accepted")
		s.Close()
	}
	for _, cursor := range []uint64{5, 10} {
		s, err := l.Subscribe(ctx, cursor)
		require.NoError(t, err)
		s.Close()
	}

	lagged := newLog(t, eventlog.Config{MaxEvents: 50, MaxBytes: 1 << 20, MaxLag: 3})
	appendN(t, lagged, 10)
	_, err := lagged.Subscribe(ctx, 6)
	var oe *eventlog.OutOfRangeError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, eventlog.OutOfRangeError{LastDelivered: 6, Recovery: 7}, *oe)
}

// K19: a subscriber whose next event is evicted is disconnected with
// *ExhaustedError; the error is sticky and its recovery cursor works.
func TestSubscriberExhaustedByEviction(t *testing.T) {
	ctx := context.Background()
	l := newLog(t, eventlog.Config{MaxEvents: 5, MaxBytes: 1 << 20})
	appendN(t, l, 10)
	s, err := l.Subscribe(ctx, 5)
	require.NoError(t, err)
	e, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(6), e.Seq())
	appendN(t, l, 10) // retained 16..20

	for range 2 {
		_, err = s.Next(ctx)
		var ee *eventlog.ExhaustedError
		require.ErrorAs(t, err, &ee)
		require.ErrorIs(t, err, eventlog.ErrExhausted)
		require.Equal(t, eventlog.ExhaustedError{Reason: eventlog.Evicted, LastDelivered: 6, Recovery: 15}, *ee)
	}
	require.Equal(t, uint64(6), s.LastDelivered())
	require.Equal(t, uint64(1), l.Stats().Exhaustions, "counted once")

	again, err := l.Subscribe(ctx, 15)
	require.NoError(t, err)
	e, err = again.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(16), e.Seq())
}

// K19/K20: a slow subscriber is disconnected, never waited for: appends
// continue at full speed while it does not read, and when it comes back it
// gets *ExhaustedError with its last delivered sequence.
func TestSlowSubscriberDisconnectedWhileAppendsContinue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := newLog(t, eventlog.Config{MaxEvents: 1000, MaxBytes: 1 << 20, MaxLag: 8})
		slow, err := l.Subscribe(ctx, 0)
		require.NoError(t, err)
		fast, err := l.Subscribe(ctx, 0)
		require.NoError(t, err)
		resume := make(chan struct{})
		result := make(chan error, 1)
		go func() {
			if err := readUntil(slow, 0, 2); err != nil {
				result <- err
				return
			}
			<-resume // the subscriber stalls
			_, err := slow.Next(ctx)
			result <- err
		}()
		fastDone := make(chan error, 1)
		go func() { fastDone <- readUntil(fast, 0, 100) }()

		for i := range 100 {
			_, err := l.Append(ctx, rec(int64(i)))
			require.NoError(t, err)
			synctest.Wait() // both subscribers run as far as they want
		}
		require.NoError(t, <-fastDone, "a subscriber that keeps up is unaffected")
		close(resume)
		err = <-result
		var ee *eventlog.ExhaustedError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, eventlog.ExhaustedError{Reason: eventlog.Lagged, LastDelivered: 2, Recovery: 92}, *ee)
		require.Equal(t, uint64(1), l.Stats().SlowDisconnects)

		_, err = l.Append(ctx, rec(101))
		require.NoError(t, err, "the log keeps working")
	})
}

// K19: cancelling a subscriber's context in the middle of delivery, while
// appends run, never panics, duplicates or skips an event, and leaves the
// cursor exactly at the last event the subscriber received.
func TestSubscriberCancelMidDelivery(t *testing.T) {
	const total = 3000
	l := newLog(t, eventlog.Config{})
	bg := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { appendN(t, l, total) })

	var got []uint64
	var cursor uint64
	rounds := 0
	for ; cursor < total; rounds++ {
		subCtx, cancelSub := context.WithCancel(bg)
		s, err := l.Subscribe(subCtx, cursor)
		require.NoError(t, err)
		nextCtx, cancelNext := context.WithCancel(bg)
		// Cancel either one call's context or the whole subscription, at
		// once or from another goroutine while Next runs or waits.
		cancel := cancelNext
		if rounds%2 == 1 {
			cancel = cancelSub
		}
		stopAfter := len(got) + 1 + rounds%17
		var cancelled chan struct{}
		for s.LastDelivered() < total {
			switch {
			case cancelled == nil && len(got) >= stopAfter:
				cancelled = make(chan struct{})
				if rounds%4 < 2 {
					cancel()
					close(cancelled)
				} else {
					go func() { cancel(); close(cancelled) }()
				}
			case cancelled != nil && len(got) >= stopAfter+3:
				<-cancelled // bound the round: the next Next sees it
			}
			e, err := s.Next(nextCtx)
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
				break
			}
			got = append(got, e.Seq())
		}
		require.Equal(t, uint64(len(got)), s.LastDelivered(), "cursor is never stale")
		if rounds%2 == 0 && s.LastDelivered() < total {
			// Only one call was cancelled: the subscription goes on.
			e, err := s.Next(bg)
			require.NoError(t, err)
			got = append(got, e.Seq())
		}
		cursor = s.LastDelivered()
		cancelNext()
		cancelSub()
		s.Close()
	}
	wg.Wait()
	require.Equal(t, seqRange(1, total), got)
	require.Greater(t, rounds, 100, "cancellation happened mid-stream many times")
}

// K19: a closed log still delivers everything retained, then ends cleanly
// with io.EOF, waking subscribers that were waiting.
func TestClosedLogDeliversRetainedThenEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := newLog(t, eventlog.Config{})
		appendN(t, l, 3)
		waiting, err := l.Subscribe(ctx, 3)
		require.NoError(t, err)
		behind, err := l.Subscribe(ctx, 1)
		require.NoError(t, err)
		ended := make(chan error, 1)
		go func() {
			_, err := waiting.Next(ctx)
			ended <- err
		}()
		synctest.Wait()
		require.NoError(t, l.Close(ctx))
		require.ErrorIs(t, <-ended, io.EOF)

		require.NoError(t, readUntil(behind, 1, 3))
		_, err = behind.Next(ctx)
		require.ErrorIs(t, err, io.EOF)

		late, err := l.Subscribe(ctx, 0)
		require.NoError(t, err, "a closed log can still be read")
		var seqs []uint64
		for e, err := range late.All(ctx) {
			require.NoError(t, err)
			seqs = append(seqs, e.Seq())
		}
		require.Equal(t, []uint64{1, 2, 3}, seqs)
	})
}

func TestSubscriptionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLog(t, eventlog.Config{})
		bg := context.Background()

		closed, err := l.Subscribe(bg, 0)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(bg)
		cancelled, err := l.Subscribe(ctx, 0)
		require.NoError(t, err)

		results := make(chan error, 2)
		for _, s := range []*eventlog.Subscription{closed, cancelled} {
			go func() {
				_, err := s.Next(bg)
				results <- err
			}()
		}
		synctest.Wait()
		closed.Close()
		closed.Close()
		cancel()
		errs := []error{<-results, <-results}
		require.ErrorIs(t, errors.Join(errs...), eventlog.ErrSubscriptionClosed)
		require.ErrorIs(t, errors.Join(errs...), context.Canceled)

		appendN(t, l, 1)
		_, err = cancelled.Next(bg)
		require.ErrorIs(t, err, context.Canceled, "the end is sticky")
		_, err = l.Subscribe(ctx, 0)
		require.ErrorIs(t, err, context.Canceled)

		for _, err := range closed.All(bg) {
			require.ErrorIs(t, err, eventlog.ErrSubscriptionClosed)
		}
	})
}
