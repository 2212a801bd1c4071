package deadline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ended reports whether ctx is done, after letting the bubble settle.
func ended(ctx context.Context) bool {
	synctest.Wait()
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestP5_WatchEndsAContextAtItsDeadlineLikeWithDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		start := time.Now()
		ctx, cancel := w.WithTimeout(t.Context(), time.Second)
		defer cancel()
		d, ok := ctx.Deadline()
		require.True(t, ok)
		require.Equal(t, start.Add(time.Second), d)
		time.Sleep(time.Second - time.Nanosecond)
		require.False(t, ended(ctx), "not before the deadline")
		require.NoError(t, ctx.Err())
		time.Sleep(time.Nanosecond)
		require.True(t, ended(ctx), "at the deadline")
		require.Equal(t, context.DeadlineExceeded, ctx.Err())
		require.Equal(t, context.DeadlineExceeded, context.Cause(ctx))
		require.Zero(t, w.Len())
	})
}

func TestP5_WatchEndsEachOfSequentialContextsAtItsOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		// Calls that end early leave the timer armed for a deadline
		// that has no context any more; the next one still ends on time.
		for range 3 {
			_, cancel := w.WithTimeout(t.Context(), time.Second)
			time.Sleep(100 * time.Millisecond)
			cancel()
		}
		start := time.Now()
		ctx, cancel := w.WithTimeout(t.Context(), time.Second)
		defer cancel()
		<-ctx.Done()
		require.Equal(t, start.Add(time.Second), time.Now())
		require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	})
}

func TestP5_WatchArmsNoTimerForCallsThatFollowOneAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		for range 1000 {
			_, cancel := w.WithTimeout(t.Context(), time.Minute)
			time.Sleep(time.Millisecond)
			cancel()
		}
		// The first call armed the timer; the later ones end before it.
		require.Equal(t, 1, w.arms)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, 1, w.arms, "nothing left to re-arm for")
	})
}

func TestP5_WatchEndsMixedDeadlinesInTheirOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		start := time.Now()
		timeouts := []time.Duration{5 * time.Second, time.Second, 3 * time.Second, time.Second, 2 * time.Second}
		var wg sync.WaitGroup
		got := make([]time.Duration, len(timeouts))
		for i, d := range timeouts {
			ctx, cancel := w.WithTimeout(t.Context(), d)
			wg.Go(func() {
				defer cancel()
				<-ctx.Done()
				got[i] = time.Since(start)
			})
		}
		wg.Wait()
		require.Equal(t, timeouts, got)
		require.Zero(t, w.Len())
	})
}

func TestP5_WatchCancelEndsAContextAsCanceledAndForgetsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		ctx, cancel := w.WithTimeout(t.Context(), time.Second)
		require.Equal(t, 1, w.Len())
		cancel()
		require.Equal(t, context.Canceled, ctx.Err())
		require.Zero(t, w.Len())
		cancel() // idempotent
		time.Sleep(2 * time.Second)
		require.Equal(t, context.Canceled, ctx.Err())
	})
}

func TestP5_WatchKeepsTheParentsEndAndEarlierDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		parent, cancelParent := context.WithTimeout(t.Context(), time.Second)
		defer cancelParent()
		ctx, cancel := w.WithTimeout(parent, time.Hour)
		defer cancel()
		pd, _ := parent.Deadline()
		d, _ := ctx.Deadline()
		require.Equal(t, pd, d, "the parent's earlier deadline")
		<-ctx.Done()
		require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)

		parent2, cancelParent2 := context.WithCancelCause(t.Context())
		ctx2, cancel2 := w.WithTimeout(parent2, time.Hour)
		defer cancel2()
		cause := errors.New("run cancelled")
		cancelParent2(cause)
		require.True(t, ended(ctx2))
		require.Equal(t, context.Canceled, ctx2.Err())
		require.Equal(t, cause, context.Cause(ctx2))
	})
}

func TestP5_WatchEndsAPastDeadlineAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		defer w.Stop()
		ctx, cancel := w.WithDeadline(t.Context(), time.Now())
		defer cancel()
		require.Equal(t, context.DeadlineExceeded, ctx.Err())
		require.Zero(t, w.Len())
	})
}

func TestP5_WatchStopCancelsWhatItHoldsAndWhatComesLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var w Watch
		ctx, cancel := w.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		w.Stop()
		require.Equal(t, context.Canceled, ctx.Err())
		later, cancelLater := w.WithTimeout(t.Context(), time.Hour)
		defer cancelLater()
		require.Equal(t, context.Canceled, later.Err())
		require.Zero(t, w.Len())
	})
}

func TestP5_WatchIsSafeForConcurrentUse(t *testing.T) {
	var w Watch
	defer w.Stop()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ctx, cancel := w.WithTimeout(t.Context(), time.Duration(g*i%7)*time.Millisecond)
				if i%2 == 0 {
					<-ctx.Done()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	require.Zero(t, w.Len())
}
