package scheduler

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Problem codes of the model operations the scheduler refuses.
const (
	// CodeModelBusy: no model slot came free within Config.ModelWait.
	// The *model.ProviderError is retryable.
	CodeModelBusy = "model_busy"
	// CodeModelWaitEnded: the run's context ended while the operation
	// waited for a slot. The error's cause is the context's error.
	CodeModelWaitEnded = "model_wait_ended"
)

// slots is the model-operation limit shared by every pair of a scheduler:
// a FIFO weighted semaphore, one unit per operation.
type slots struct {
	sem      *semaphore.Weighted
	wait     time.Duration // 0: as long as the context allows
	inFlight atomic.Int64
	waited   atomic.Uint64 // operations that did not get a slot at once
}

func newSlots(n int, wait time.Duration) *slots {
	return &slots{sem: semaphore.NewWeighted(int64(n)), wait: wait}
}

// acquire takes one slot, waiting at most s.wait and never past ctx.
func (s *slots) acquire(ctx context.Context) error {
	if !s.sem.TryAcquire(1) {
		s.waited.Add(1)
		wctx := ctx
		if s.wait > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, s.wait)
			defer cancel()
		}
		if err := s.sem.Acquire(wctx, 1); err != nil {
			if ctx.Err() == nil {
				// Our own bound, not the caller's context: advise a retry.
				return busy(err)
			}
			return waitEnded(ctx.Err())
		}
	}
	s.inFlight.Add(1)
	return nil
}

func (s *slots) release() {
	s.inFlight.Add(-1)
	s.sem.Release(1)
}

func busy(cause error) error {
	e, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem:   problem.Must(CodeModelBusy, "no model slot came free in time"),
		Retryable: true,
		Cause:     cause,
	})
	if err != nil {
		return err
	}
	return e
}

// waitEnded keeps the context's error as the cause, so the engine decides
// from its own context whether the operation was cancelled.
func waitEnded(cause error) error {
	e, err := model.NewProviderError(model.ProviderErrorConfig{
		Problem: problem.Must(CodeModelWaitEnded, "the run ended while waiting for a model slot"),
		Cause:   cause,
	})
	if err != nil {
		return err
	}
	return e
}

// gate is the decorator the scheduler puts around each worker's provider
// when Config.ModelOps is set: a model operation holds a slot from Stream
// until its stream ends. The kernel sees an ordinary provider.
type gate struct {
	inner model.Provider
	slots *slots
}

// Stream takes a slot, then starts the operation. The slot is given back
// here if no stream comes of it (an error, no stream, or a panic, which
// goes on to the engine's containment).
func (g *gate) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	if err := g.slots.acquire(ctx); err != nil {
		return nil, err
	}
	held := true
	defer func() {
		if held {
			g.slots.release()
		}
	}()
	st, err := g.inner.Stream(ctx, req)
	if err != nil || st == nil {
		return st, err
	}
	held = false
	return &gatedStream{inner: st, slots: g.slots}, nil
}

// gatedStream gives its slot back exactly once, at the first of: a
// terminal item, any Recv error (io.EOF included), a panic in Recv, Close.
type gatedStream struct {
	inner model.Stream
	slots *slots
	ended atomic.Bool
}

func (s *gatedStream) Recv() (model.Item, error) {
	open := false
	defer func() {
		if !open {
			s.end()
		}
	}()
	it, err := s.inner.Recv()
	open = err == nil && !it.IsTerminal()
	return it, err
}

func (s *gatedStream) Close() error {
	s.end()
	return s.inner.Close()
}

func (s *gatedStream) end() {
	if s.ended.CompareAndSwap(false, true) {
		s.slots.release()
	}
}
