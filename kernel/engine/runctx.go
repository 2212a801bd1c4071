package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runCtx is a run's own context: the caller's context, which the run lives
// under, and the run's own cancellation (Run.Cancel, Shutdown, the end of
// the run). It behaves as context.WithCancel(caller) would, but registers
// nothing with the caller and makes no channel until someone asks for Done
// or an AfterFunc. Most runs are never waited on that way — a provider in
// the same process polls Err at most — and the registration, the channel
// and the cancellation were a measurable part of a short run.
//
// Err polls the caller until the context has ended, so the caller's end is
// seen by the next Err even with no watch on it.
type runCtx struct {
	caller context.Context

	mu     sync.Mutex
	state  atomic.Uint32 // ctxLive until the context ends; written under mu
	done   chan struct{} // made by the first Done or AfterFunc
	watch  func() bool   // stops the watch on the caller, once one is set
	afters []*afterFunc  // run, each on its own goroutine, when the context ends
}

const (
	ctxLive      uint32 = iota
	ctxCancelled        // cancelled by the run: Err is context.Canceled
	ctxCaller           // the caller ended first: Err is the caller's
)

type afterFunc struct{ f func() }

func (c *runCtx) Deadline() (time.Time, bool) { return c.caller.Deadline() }

// Value reaches the caller's values. Once the run has cancelled itself, the
// context package's own lookup (context.Cause) finds an ended context of
// the run's making first, so the cause stays context.Canceled even if the
// caller's context ends later with a cause of its own.
func (c *runCtx) Value(key any) any {
	if c.state.Load() == ctxCancelled {
		if v := cancelled.Value(key); v != nil {
			return v
		}
	}
	return c.caller.Value(key)
}

// cancelled is an ended context that holds no values: what Value consults
// first once the run has cancelled itself. It never changes after
// initialisation.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Err is nil while the context is live. A caller's context that has ended
// ends the context here, so Done is closed by the time Err reports it.
func (c *runCtx) Err() error {
	s := c.state.Load()
	if s == ctxLive {
		if c.caller.Err() == nil {
			return nil
		}
		c.end(ctxCaller)
		s = c.state.Load() // ctxCaller, or ctxCancelled if a cancel came first
	} else {
		// end sets the state and closes Done under mu: reading the state
		// under mu means Done is closed when Err reports the end.
		c.mu.Lock()
		s = c.state.Load()
		c.mu.Unlock()
	}
	if s == ctxCancelled {
		return context.Canceled
	}
	return c.caller.Err()
}

// Done makes the channel on first use, and from then on watches the
// caller's context, so that its end closes the channel.
func (c *runCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.state.Load() != ctxLive {
			close(c.done)
		} else {
			c.watchCaller()
		}
	}
	return c.done
}

// AfterFunc makes the context an afterFuncer, so that contexts derived
// from it (context.WithCancel, context.AfterFunc) register here instead of
// starting a goroutine each to watch Done. As with context.AfterFunc, f
// runs on its own goroutine once the context ends, and stop reports
// whether it stopped f from running.
func (c *runCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.state.Load() != ctxLive {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	c.watchCaller()
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.afters, a)
		if i < 0 {
			return false
		}
		c.afters = slices.Delete(c.afters, i, i+1)
		return true
	}
}

// watchCaller ends c when the caller's context ends. Whoever calls it
// holds c.mu; the caller's context calls back on a goroutine of its own,
// never under c.mu.
func (c *runCtx) watchCaller() {
	if c.watch != nil || c.caller.Done() == nil {
		return
	}
	c.watch = context.AfterFunc(c.caller, func() { c.end(ctxCaller) })
}

// cancel ends the context as the run's own cancellation, or as the
// caller's when the caller has already ended.
func (c *runCtx) cancel() {
	if c.caller.Err() != nil {
		c.end(ctxCaller)
		return
	}
	c.end(ctxCancelled)
}

// end ends a live context with state s, once.
func (c *runCtx) end(s uint32) {
	c.mu.Lock()
	if c.state.Load() != ctxLive {
		c.mu.Unlock()
		return
	}
	// The state is set before Done is closed, so whoever sees Done closed
	// finds Err non-nil; Err waits for mu, so whoever sees Err non-nil
	// finds Done closed.
	c.state.Store(s)
	if c.done != nil {
		close(c.done)
	}
	afters, watch := c.afters, c.watch
	c.afters, c.watch = nil, nil
	c.mu.Unlock()
	if watch != nil {
		watch()
	}
	for _, a := range afters {
		go a.f()
	}
}
