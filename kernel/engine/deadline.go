package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyDeadline is a context that ends d after it is first asked about
// (Deadline, Done or Err) or started, or when released. Until then it costs no
// clock reading and no timer: the observers that bound it by FinalizeTimeout
// are mostly fast and never look at their context, and a timer per run, or
// a clock reading per event, was most of what a required observer cost.
//
// Its base context is never cancelled (a run's append context), so only the
// deadline and release end it.
type lazyDeadline struct {
	base  context.Context
	d     time.Duration
	armed atomic.Bool // the deadline is set

	mu       sync.Mutex
	deadline time.Time
	done     chan struct{} // made by the first Done
	timer    *time.Timer
	err      error // set when done is closed
	released bool
}

func newLazyDeadline(base context.Context, d time.Duration) *lazyDeadline {
	return &lazyDeadline{base: base, d: d}
}

// start sets the deadline now, for a bound on a whole stretch of work
// (finalization) rather than on one observer call. It still makes no
// timer until someone waits on Done.
func (c *lazyDeadline) start() {
	c.mu.Lock()
	c.arm()
	c.mu.Unlock()
}

// arm sets the deadline if it is not set yet. The caller holds c.mu.
func (c *lazyDeadline) arm() {
	if !c.armed.Load() {
		c.deadline = time.Now().Add(c.d)
		c.armed.Store(true)
	}
}

// Deadline sets the deadline on first use and returns it.
func (c *lazyDeadline) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arm()
	return c.deadline, true
}

// Done sets the deadline on first use and returns a channel closed when it
// passes or the context is released.
func (c *lazyDeadline) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	if c.released {
		c.end(context.Canceled)
		return c.done
	}
	c.arm()
	left := time.Until(c.deadline)
	if left <= 0 {
		c.end(context.DeadlineExceeded)
		return c.done
	}
	c.done = make(chan struct{})
	c.timer = time.AfterFunc(left, func() {
		c.mu.Lock()
		c.end(context.DeadlineExceeded)
		c.mu.Unlock()
	})
	return c.done
}

// Err sets the deadline on first use, like Deadline and Done, so that an
// observer that only polls Err is bounded too. It is nil until the context
// has ended; once it is not, Done is closed.
func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
	case c.released:
		c.end(context.Canceled)
	case !c.armed.Load():
		c.arm() // the bound starts now: d is left
	case !time.Now().Before(c.deadline):
		c.end(context.DeadlineExceeded)
	}
	return c.err
}

func (c *lazyDeadline) Value(key any) any { return c.base.Value(key) }

// end closes done with err, once. The caller holds c.mu.
func (c *lazyDeadline) end(err error) {
	if c.err != nil {
		return
	}
	if c.done == nil {
		c.done = make(chan struct{})
	}
	c.err = err
	close(c.done)
	if c.timer != nil {
		c.timer.Stop()
	}
}

// release ends the context as cancelled, as a CancelFunc would. Nothing is
// made for a context nobody waits on: Done and Err see released.
func (c *lazyDeadline) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.done != nil {
		c.end(context.Canceled)
	}
}

// spent reports whether less than half of the bound is left: a context
// nobody has asked about yet still has all of it. The deadline is written
// before armed is set and never again, so it is read without the lock.
func (c *lazyDeadline) spent() bool {
	return c.armed.Load() && time.Until(c.deadline) < c.d/2
}
