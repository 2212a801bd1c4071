package eventlog

import (
	"context"
	"sync/atomic"
)

// token serializes commit plus publication when a log has observers, so
// every observer sees sequences in order. It is a lock a waiting appender
// can give up on when its context ends. Taking a free token is one
// compare-and-swap and giving it back one store; only a waiter parks, on a
// channel. A channel of capacity one as the token did the same with two
// channel operations per append, a measurable part of an observed append.
type token struct {
	held    atomic.Bool
	waiters atomic.Int32
	wake    chan struct{} // capacity one: a give-back tells one waiter to try again
}

func newToken() token { return token{wake: make(chan struct{}, 1)} }

// acquire takes the token, preferring it over a done context.
func (t *token) acquire(ctx context.Context) error {
	if t.held.CompareAndSwap(false, true) {
		return nil
	}
	return t.wait(ctx)
}

func (t *token) wait(ctx context.Context) error {
	// Counted before the next try: a give-back either sees the waiter and
	// wakes it, or happened before the try, which then takes the token.
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	for {
		if t.held.CompareAndSwap(false, true) {
			return nil
		}
		select {
		case <-t.wake:
		case <-ctx.Done():
			if t.held.CompareAndSwap(false, true) {
				return nil
			}
			return ctx.Err()
		}
	}
}

// release gives the token back and wakes a waiter, if there is one. A wake
// no waiter takes stays in the channel and costs the next waiter one more
// try.
func (t *token) release() {
	t.held.Store(false)
	if t.waiters.Load() > 0 {
		select {
		case t.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
}
