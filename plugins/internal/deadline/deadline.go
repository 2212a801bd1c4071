package deadline

import (
	"context"
	"sync"
	"time"
)

// Watch ends the contexts it made at their deadlines. The zero value is
// ready to use; Stop releases its timer.
type Watch struct {
	mu      sync.Mutex
	timer   *time.Timer // fires at armed; nil until the first deadline
	armed   time.Time   // zero when the timer is not armed
	head    *watched    // the contexts not yet ended, unordered
	stopped bool
	arms    int // times the timer was set, for the tests
}

// watched is a context that Watch ends at its deadline with the cause
// context.DeadlineExceeded, like one from context.WithDeadline.
type watched struct {
	context.Context // the cancelable child of the parent
	cancel          context.CancelCauseFunc
	at              time.Time
	prev, next      *watched
	linked          bool
}

// Deadline is the earlier of the parent's deadline and the Watch's.
func (c *watched) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

// Err is context.DeadlineExceeded once the deadline has passed, as for
// context.WithDeadline.
func (c *watched) Err() error {
	err := c.Context.Err()
	if err == context.Canceled && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// WithTimeout is WithDeadline(parent, time.Now().Add(d)).
func (w *Watch) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return w.WithDeadline(parent, time.Now().Add(d))
}

// WithDeadline returns a child of parent that ends at the latest at at,
// with Err context.DeadlineExceeded, and its cancel function, which must
// be called when the work ends (it ends the context with
// context.Canceled). After Stop the context is returned canceled.
func (w *Watch) WithDeadline(parent context.Context, at time.Time) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(parent)
	c := &watched{Context: inner, cancel: cancel, at: at}
	w.mu.Lock()
	switch {
	case w.stopped:
		w.mu.Unlock()
		cancel(context.Canceled)
		return c, func() {}
	case !time.Now().Before(at):
		w.mu.Unlock()
		cancel(context.DeadlineExceeded)
		return c, func() {}
	}
	w.link(c)
	if w.armed.IsZero() || at.Before(w.armed) {
		w.arm(at)
	}
	w.mu.Unlock()
	return c, func() {
		w.mu.Lock()
		w.unlink(c)
		w.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Stop releases the timer and cancels every context the Watch holds; the
// Watch makes no more contexts that live.
func (w *Watch) Stop() {
	var held []*watched
	w.mu.Lock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.armed = time.Time{}
	for w.head != nil {
		held = append(held, w.head)
		w.unlink(w.head)
	}
	w.mu.Unlock()
	for _, c := range held {
		c.cancel(context.Canceled)
	}
}

// Len returns the number of contexts the Watch holds.
func (w *Watch) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for c := w.head; c != nil; c = c.next {
		n++
	}
	return n
}

// arm sets the timer to fire at at; w.mu is held.
func (w *Watch) arm(at time.Time) {
	w.armed = at
	w.arms++
	if w.timer == nil {
		w.timer = time.AfterFunc(time.Until(at), w.fire)
		return
	}
	w.timer.Reset(time.Until(at))
}

// fire ends the contexts whose deadline has passed and arms the timer for
// the earliest of the rest. Its cost is linear in the contexts held, which
// the callers bound (calls in flight), and it runs once per earliest
// deadline, not once per context.
func (w *Watch) fire() {
	now := time.Now()
	var due []*watched
	w.mu.Lock()
	w.armed = time.Time{}
	var next time.Time
	for c := w.head; c != nil; {
		n := c.next
		if !now.Before(c.at) {
			w.unlink(c)
			due = append(due, c)
		} else if next.IsZero() || c.at.Before(next) {
			next = c.at
		}
		c = n
	}
	if !next.IsZero() && !w.stopped {
		w.arm(next)
	}
	w.mu.Unlock()
	for _, c := range due {
		c.cancel(context.DeadlineExceeded)
	}
}

func (w *Watch) link(c *watched) {
	c.next = w.head
	if w.head != nil {
		w.head.prev = c
	}
	w.head = c
	c.linked = true
}

func (w *Watch) unlink(c *watched) {
	if !c.linked {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		w.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next, c.linked = nil, nil, false
}
