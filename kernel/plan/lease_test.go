package plan_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

func newLease(t testing.TB, release func() error, timeout time.Duration) *plan.Lease {
	t.Helper()
	l, err := plan.NewLease(newPlan(t, "plan-1", baseConfigs()), release, plan.LeaseConfig{ReleaseTimeout: timeout})
	require.NoError(t, err)
	return l
}

// releaseAll calls Release from n goroutines at once and returns the
// results.
func releaseAll(l *plan.Lease, n int) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = l.Release(context.Background())
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func TestK14_ReleaseExactlyOnce(t *testing.T) {
	t.Run("callback", func(t *testing.T) {
		var calls atomic.Int32
		l := newLease(t, func() error { calls.Add(1); return nil }, 0)
		for _, err := range releaseAll(l, 32) {
			require.NoError(t, err)
		}
		require.NoError(t, l.Release(context.Background()))
		require.Equal(t, int32(1), calls.Load())
	})

	t.Run("every call returns the one settled outcome", func(t *testing.T) {
		var calls atomic.Int32
		l := newLease(t, func() error { calls.Add(1); return errors.New("boom") }, 0)
		errs := releaseAll(l, 32)
		first := errs[0]
		require.Error(t, first)
		for _, err := range append(errs, l.Release(context.Background())) {
			require.Same(t, first, err)
		}
		require.Equal(t, int32(1), calls.Load())
	})

	t.Run("memory source count", func(t *testing.T) {
		m, err := plan.NewMemory(newPlan(t, "plan-1", baseConfigs()))
		require.NoError(t, err)
		l1, l2 := lease(t, m), lease(t, m)
		require.Equal(t, 2, m.Outstanding("plan-1"))
		for _, err := range releaseAll(l1, 16) {
			require.NoError(t, err)
		}
		// A second decrement would have taken l2's count too.
		require.Equal(t, 1, m.Outstanding("plan-1"))
		release(t, l2)
		release(t, l2)
		require.Zero(t, m.Outstanding("plan-1"))
		require.Zero(t, m.Stats().Outstanding)
	})

	t.Run("nil callback", func(t *testing.T) {
		l := newLease(t, nil, 0)
		release(t, l)
		release(t, l)
	})
}

func TestK14_ReleaseBoundedWhenCallbackBlocks(t *testing.T) {
	t.Run("lease bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			unblock := make(chan struct{})
			free := sync.OnceFunc(func() { close(unblock) })
			defer free() // a failed assertion must not leave the bubble blocked
			var calls atomic.Int32
			l := newLease(t, func() error { calls.Add(1); <-unblock; return nil }, 2*time.Second)

			var err error
			var elapsed time.Duration
			var wg sync.WaitGroup
			wg.Go(func() {
				start := time.Now()
				err = l.Release(context.Background())
				elapsed = time.Since(start)
			})
			synctest.Wait() // the first call is waiting for the callback

			// A later caller waits for the first call's outcome; one with
			// a shorter context gives up on its own.
			var later, impatient error
			var impatientElapsed time.Duration
			wg.Go(func() { later = l.Release(context.Background()) })
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				start := time.Now()
				impatient = l.Release(ctx)
				impatientElapsed = time.Since(start)
			})
			wg.Wait()
			require.Equal(t, 2*time.Second, elapsed, "the wait ends exactly at the bound")

			var re *plan.ReleaseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, plan.ReleaseTimedOut, re.Reason)
			require.Equal(t, plan.ID("plan-1"), re.Plan)
			require.Equal(t, 2*time.Second, re.Timeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)

			require.Same(t, err, later)
			require.Equal(t, 100*time.Millisecond, impatientElapsed)
			var ie *plan.ReleaseError
			require.ErrorAs(t, impatient, &ie)
			require.Equal(t, plan.ReleaseTimedOut, ie.Reason)
			require.NotSame(t, err, impatient)

			// The outcome is settled: the callback returning later does
			// not change it, and it never runs again.
			free()
			synctest.Wait()
			require.Same(t, err, l.Release(context.Background()))
			require.Equal(t, int32(1), calls.Load())
		})
	})

	t.Run("caller context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			unblock := make(chan struct{})
			free := sync.OnceFunc(func() { close(unblock) })
			defer free() // a failed assertion must not leave the bubble blocked
			l := newLease(t, func() error { <-unblock; return nil }, time.Hour)
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(300*time.Millisecond, func() { cancel(nil) })

			start := time.Now()
			err := l.Release(ctx)
			require.Equal(t, 300*time.Millisecond, time.Since(start))
			var re *plan.ReleaseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, plan.ReleaseTimedOut, re.Reason)
			require.ErrorIs(t, err, context.Canceled)

			free()
			synctest.Wait()
		})
	})

	t.Run("default bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			unblock := make(chan struct{})
			free := sync.OnceFunc(func() { close(unblock) })
			defer free() // a failed assertion must not leave the bubble blocked
			l := newLease(t, func() error { <-unblock; return nil }, 0)
			start := time.Now()
			err := l.Release(context.Background())
			require.Equal(t, plan.DefaultReleaseTimeout, time.Since(start))
			require.ErrorIs(t, err, context.DeadlineExceeded)
			free()
			synctest.Wait()
		})
	})

	t.Run("quick callback is not delayed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newLease(t, func() error { return nil }, time.Minute)
			start := time.Now()
			require.NoError(t, l.Release(context.Background()))
			require.Zero(t, time.Since(start))
		})
	})
}

func TestK14_ReleasePanicContained(t *testing.T) {
	cases := map[string]func() error{
		"panic value": func() error { panic("secret-token-123") },
		"panic error": func() error { panic(fmt.Errorf("password=secret-token-123")) },
		"panic nil":   func() error { panic(nil) },
		"goexit":      func() error { runtime.Goexit(); return nil },
	}
	for name, cb := range cases {
		t.Run(name, func(t *testing.T) {
			l := newLease(t, cb, 0)
			var err error
			require.NotPanics(t, func() { err = l.Release(context.Background()) })
			var re *plan.ReleaseError
			require.ErrorAs(t, err, &re)
			require.Equal(t, plan.ReleasePanicked, re.Reason)
			require.Nil(t, errors.Unwrap(err), "the panic value is not kept")
			require.NotContains(t, err.Error(), "secret")
			require.Contains(t, err.Error(), "panicked")
			require.Same(t, err, l.Release(context.Background()))
		})
	}
}

func TestK14_ReleaseFailureTyped(t *testing.T) {
	errStore := errors.New("store unavailable")
	l := newLease(t, func() error { return fmt.Errorf("token=secret-token-123: %w", errStore) }, 0)
	err := l.Release(context.Background())

	var re *plan.ReleaseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, plan.ReleaseFailed, re.Reason)
	require.Equal(t, plan.ID("plan-1"), re.Plan)
	require.ErrorIs(t, err, errStore, "the cause stays reachable")
	require.NotContains(t, err.Error(), "secret", "the message never quotes the callback's error")
	require.Equal(t, "plan lease release failed (plan plan-1)", err.Error())
	require.Equal(t, "timed out", plan.ReleaseTimedOut.String())
}

func TestK14_NewLeaseValidates(t *testing.T) {
	_, err := plan.NewLease(plan.Plan{}, nil, plan.LeaseConfig{})
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = plan.NewLease(newPlan(t, "plan-1", nil), nil, plan.LeaseConfig{ReleaseTimeout: -time.Second})
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func TestK14_InlineReleaseExactlyOnceAndPanicContained(t *testing.T) {
	p := newPlan(t, "plan-1", baseConfigs())
	var calls atomic.Int32
	l, err := plan.NewLease(p, func() error { calls.Add(1); panic("secret-token") }, plan.LeaseConfig{Inline: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = l.Release(context.Background()) })
	}
	wg.Wait()
	require.Equal(t, int32(1), calls.Load())
	var re *plan.ReleaseError
	for _, err := range errs {
		require.ErrorAs(t, err, &re)
		require.Equal(t, plan.ReleasePanicked, re.Reason)
		require.NotContains(t, err.Error(), "secret-token")
	}
}

// An inline release makes no channel to wait on; a caller that comes while
// the inline callback is still running makes one, waits for the outcome and
// gets the same one, or gives up on its own context without changing it
// (K14).
func TestK14_LaterCallerWaitsForInlineRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, proceed := make(chan struct{}), make(chan struct{})
		failure := errors.New("decrement failed")
		l, err := plan.NewLease(newPlan(t, "plan-1", baseConfigs()), func() error {
			close(entered)
			<-proceed
			return failure
		}, plan.LeaseConfig{Inline: true})
		require.NoError(t, err)
		first := make(chan error, 1)
		go func() { first <- l.Release(context.Background()) }()
		<-entered
		later := make(chan error, 1)
		go func() { later <- l.Release(context.Background()) }()
		ctx, cancel := context.WithCancel(context.Background())
		impatient := make(chan error, 1)
		go func() { impatient <- l.Release(ctx) }()
		synctest.Wait()
		require.Empty(t, later, "a later caller waits for the outcome")
		cancel()
		var re *plan.ReleaseError
		require.ErrorAs(t, <-impatient, &re)
		require.Equal(t, plan.ReleaseTimedOut, re.Reason)
		close(proceed)
		err = <-first
		require.ErrorIs(t, err, failure)
		require.Same(t, err, <-later)
		require.Same(t, err, l.Release(context.Background()), "settled: no wait")
	})
}
