package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// runCtx is a run's own context: the caller's context, which the run lives
// under, and the run's own cancellation (Run.Cancel, Shutdown, the end of
// the run). It is context.WithCancel(caller) made only when someone first
// asks for Done — a provider waiting on it, a context derived from it —
// and until then a state the run sets and Err reads. Most runs are never
// waited on that way (a provider in the same process polls Err at most),
// and the registration with the caller's context, the channel and the
// cancellation were a measurable part of a short run.
//
// Once made, the real context answers Done, Err and Value, so contexts
// derived from the run's context, directly or through a value, register
// with it as with any context.WithCancel, and its cancellation reaches
// them before cancel returns.
type runCtx struct {
	caller context.Context

	mu    sync.Mutex
	state atomic.Uint32           // ctxLive until the context ends; written under mu
	real  atomic.Pointer[realCtx] // made by the first Done, under mu
}

// realCtx is context.WithCancel of the caller's context and its cancel.
type realCtx struct {
	ctx  context.Context
	stop context.CancelFunc
}

const (
	ctxLive      uint32 = iota
	ctxCancelled        // cancelled by the run: Err is context.Canceled
	ctxCaller           // the caller's context ended first: Err is its error
)

func (c *runCtx) Deadline() (time.Time, bool) { return c.caller.Deadline() }

// Done makes the real context on first use.
func (c *runCtx) Done() <-chan struct{} { return c.made().ctx.Done() }

// Err is nil while the context is live. Before the real context is made,
// a caller's context that has ended ends the context here.
func (c *runCtx) Err() error {
	if m := c.real.Load(); m != nil {
		return m.ctx.Err()
	}
	s := c.state.Load()
	if s != ctxLive {
		// A real context made since the first load answers for the end:
		// the state may record the caller's end before the real context
		// has heard of it.
		if m := c.real.Load(); m != nil {
			return m.ctx.Err()
		}
	}
	switch s {
	case ctxCancelled:
		return context.Canceled
	case ctxCaller:
		return c.caller.Err()
	}
	if c.caller.Err() == nil {
		return nil
	}
	c.mu.Lock()
	if c.state.Load() == ctxLive {
		c.state.Store(ctxCaller)
	}
	c.mu.Unlock()
	return c.Err() // as ended: by the caller, or by a cancel that came first
}

// Value reaches the caller's values. Once the run has cancelled itself, the
// context package's own lookup (context.Cause) finds an ended context of
// the run's first, so the cause stays context.Canceled even if the caller's
// context ends later with a cause of its own.
func (c *runCtx) Value(key any) any {
	if m := c.real.Load(); m != nil {
		return m.ctx.Value(key)
	}
	if c.state.Load() == ctxCancelled {
		if v := cancelled.Value(key); v != nil {
			return v
		}
	}
	return c.caller.Value(key)
}

// cancelled is an ended context that holds no values: what Value consults
// first once the run has cancelled itself, before a real context is made.
// Nothing registers with it: the context package accepts a context found
// through Value only when its Done is the run's own. It never changes after
// initialisation.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// made returns the real context, making it ended already if the context
// has ended.
func (c *runCtx) made() *realCtx {
	if m := c.real.Load(); m != nil {
		return m
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.real.Load(); m != nil {
		return m
	}
	// A caller's context that has ended ends the new one at once, with
	// its error and cause. After the run's own cancel the caller's later
	// end must not reach it: it keeps only the caller's values.
	base := c.caller
	if c.state.Load() == ctxCancelled {
		base = context.WithoutCancel(base)
	}
	ctx, stop := context.WithCancel(base)
	if c.state.Load() == ctxCancelled {
		stop()
	}
	m := &realCtx{ctx: ctx, stop: stop}
	c.real.Store(m)
	return m
}

// cancel ends the context as the run's own cancellation, or as the
// caller's when the caller's context has already ended. The engine calls
// it at the end of every run, which also releases the real context, if
// one was made, from the caller's.
func (c *runCtx) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The real context ends before the state says so: whoever sees Err
	// report the end finds Done closed.
	if m := c.real.Load(); m != nil {
		m.stop()
	}
	if c.state.Load() == ctxLive {
		s := ctxCancelled
		if c.caller.Err() != nil {
			s = ctxCaller
		}
		c.state.Store(s)
	}
}
