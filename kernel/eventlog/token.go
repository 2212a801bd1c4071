package eventlog

import (
	"context"
	"sync/atomic"
)

// token serializes commit plus publication when a log has observers, so
// every observer sees sequences in order. It is a one-slot channel: an
// appender holds the token once its send into the slot went through, and
// gives it back by emptying the slot. A waiting appender gives up when its
// context ends. Go queues blocked senders in arrival order, so a token given
// back while appenders wait goes to the one that has waited longest: one
// that takes it back to back cannot starve another whose wait is bounded
// (an observer's bound).
type token struct {
	slot    chan struct{}
	waiting atomic.Int32 // appenders blocked in acquire
}

// init makes the token's slot. A log holds its token by value, so a log
// with observers makes only the slot, once.
func (t *token) init() { t.slot = make(chan struct{}, 1) }

// acquire takes the token, preferring it over a done context.
func (t *token) acquire(ctx context.Context) error {
	select {
	case t.slot <- struct{}{}:
		return nil
	default:
	}
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	select {
	case t.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives the token back; the longest waiter, if any, takes it.
func (t *token) release() { <-t.slot }
