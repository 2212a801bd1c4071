package eventlog

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// token serializes commit plus publication when a log has observers, so
// every observer sees sequences in order. It is a lock a waiting appender
// can give up on when its context ends, and it is fair: a token given back
// while appenders wait goes to the one that has waited longest, so an
// appender that takes it back to back cannot starve one whose wait is
// bounded (an observer's bound).
//
// Taking a free token is one compare-and-swap and giving it back with
// nobody waiting one more; only a contended token takes the mutex and
// parks waiters, each on a channel of its own. A one-slot channel as the
// token cost two channel operations on every observed append.
type token struct {
	state atomic.Int32 // tokenFree, tokenHeld or tokenQueued

	mu sync.Mutex
	// waiters is made at the first contention and kept: most logs never
	// see one, and every log is smaller without the room.
	waiters *waiters
}

// waiters are the appenders waiting for a token, longest first; a close
// hands one the token.
type waiters struct{ queue []chan struct{} }

const (
	tokenFree   int32 = iota
	tokenHeld         // held, nobody waits
	tokenQueued       // held, and queue has waiters: a give-back hands it on
)

// acquire takes the token, preferring it over a done context.
func (t *token) acquire(ctx context.Context) error {
	if t.state.CompareAndSwap(tokenFree, tokenHeld) {
		return nil
	}
	return t.wait(ctx)
}

func (t *token) wait(ctx context.Context) error {
	t.mu.Lock()
	for {
		if t.state.CompareAndSwap(tokenFree, tokenHeld) {
			t.mu.Unlock()
			return nil
		}
		// Marked under mu before queueing, so that a give-back that sees
		// the mark finds this waiter in the queue.
		if t.state.CompareAndSwap(tokenHeld, tokenQueued) || t.state.Load() == tokenQueued {
			break
		}
	}
	ch := make(chan struct{})
	if t.waiters == nil {
		t.waiters = new(waiters)
	}
	t.waiters.queue = append(t.waiters.queue, ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waiters
	i := slices.Index(w.queue, ch)
	if i < 0 {
		return nil // handed the token as the context ended: keep it
	}
	w.queue = slices.Delete(w.queue, i, i+1)
	if len(w.queue) == 0 {
		t.state.Store(tokenHeld) // the holder still holds it; nobody waits now
	}
	return ctx.Err()
}

// release gives the token back, or hands it straight to the longest
// waiter.
func (t *token) release() {
	if t.state.CompareAndSwap(tokenHeld, tokenFree) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waiters
	if w == nil || len(w.queue) == 0 {
		t.state.Store(tokenFree)
		return
	}
	ch := w.queue[0]
	w.queue = slices.Delete(w.queue, 0, 1)
	if len(w.queue) == 0 {
		t.state.Store(tokenHeld) // the new holder's, with nobody waiting
	}
	close(ch)
}
