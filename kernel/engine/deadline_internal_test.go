package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

func TestLazyDeadlineStartsWhenFirstAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := context.WithValue(context.Background(), ctxKey{}, "v")
		c := newLazyDeadline(base, time.Second)
		require.Equal(t, "v", c.Value(ctxKey{}))

		time.Sleep(time.Hour) // nobody asked: the bound has not started
		require.False(t, c.spent())
		start := time.Now()
		require.NoError(t, c.Err()) // asks: the bound starts now
		time.Sleep(time.Second / 2)
		require.NoError(t, c.Err())

		d, ok := c.Deadline()
		require.True(t, ok)
		require.Equal(t, start.Add(time.Second), d)
		<-c.Done()
		require.Equal(t, time.Second, time.Since(start))
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)

		c.release() // after the deadline: the error stays
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
	})
}

func TestLazyDeadlineErrAndDoneAgree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newLazyDeadline(context.Background(), time.Second)
		c.start()
		require.NoError(t, c.Err())
		time.Sleep(600 * time.Millisecond)
		require.True(t, c.spent(), "less than half left")
		time.Sleep(400 * time.Millisecond)
		// Past the deadline with no timer yet: Err ends it, and Done is
		// then closed.
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		select {
		case <-c.Done():
		default:
			t.Fatal("Err reported an end that Done did not")
		}
	})
}

func TestLazyDeadlineReleaseCancels(t *testing.T) {
	t.Run("unasked", func(t *testing.T) {
		c := newLazyDeadline(context.Background(), time.Hour)
		c.release()
		require.ErrorIs(t, c.Err(), context.Canceled)
		<-c.Done()
	})
	t.Run("waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := newLazyDeadline(context.Background(), time.Hour)
			derived, cancel := context.WithCancel(c) // propagates through Done
			defer cancel()
			done := c.Done()
			c.release()
			<-done
			<-derived.Done()
			require.ErrorIs(t, c.Err(), context.Canceled)
			require.ErrorIs(t, derived.Err(), context.Canceled)
			synctest.Wait()
		})
	})
}
