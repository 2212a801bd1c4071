package providerkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// maxItems bounds a stream the kit reads: every valid item carries at
// least one byte of text, a call or the terminal.
const maxItems = bound.MaxTextPerOperation + bound.MaxToolCallsPerOperation + 2

func violation(format string, args ...any) error {
	return fmt.Errorf("providerkit: "+format, args...)
}

// within runs f in a goroutine and waits at most d, so that a provider
// that hangs or panics fails the check instead of the whole test binary.
// The first error is f's, the second is the kit's (timeout or panic).
func within[T any](d time.Duration, what string, f func() (T, error)) (T, error, error) {
	type result struct {
		v        T
		err      error
		panicked any
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panicked = recover()
			ch <- r
		}()
		r.v, r.err = f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var zero T
	select {
	case r := <-ch:
		if r.panicked != nil {
			return zero, nil, violation("%s panicked: %v", what, r.panicked)
		}
		return r.v, r.err, nil
	case <-timer.C:
		return zero, nil, violation("%s did not return within %v", what, d)
	}
}

func open(ctx context.Context, p model.Provider, o options, d time.Duration) (model.Stream, error, error) {
	return within(d, "Stream", func() (model.Stream, error) { return p.Stream(ctx, o.req) })
}

func recv(s model.Stream, d time.Duration, what string) (model.Item, error, error) {
	return within(d, what, s.Recv)
}

func closeStream(s model.Stream, d time.Duration, what string) (error, error) {
	_, err, v := within(d, what, func() (struct{}, error) { return struct{}{}, s.Close() })
	return err, v
}

// readAll reads s to its end under the K23 rules. It returns the
// provider's Recv error (a stream may end that way) or the kit's violation.
func readAll(s model.Stream, o options, asm *model.Assembler) (recvErr, v error) {
	for i := range maxItems {
		it, err, v := recv(s, o.wait, "Recv")
		if v != nil {
			return nil, v
		}
		if err == io.EOF {
			if err := asm.End(); err != nil {
				return nil, violation("K23: %v", err)
			}
			for range 2 {
				_, again, v := recv(s, o.wait, "Recv after io.EOF")
				if v != nil {
					return nil, v
				}
				if again != io.EOF {
					return nil, violation("K23: Recv after io.EOF returned %v, want io.EOF again", again)
				}
			}
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
		if err := asm.Add(it); err != nil {
			return nil, violation("K23: item %d (%v): %v", i, it.Kind(), err)
		}
	}
	return nil, violation("K23: the stream did not end after %d items", maxItems)
}

func checkText(p model.Provider, o options) error     { return checkComplete(p, o, false) }
func checkToolCall(p model.Provider, o options) error { return checkComplete(p, o, true) }

// checkComplete reads a stream that must complete: with text only, or
// with at least one tool call.
func checkComplete(p model.Provider, o options, wantCalls bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err, v := open(ctx, p, o, o.wait)
	if v != nil {
		return v
	}
	if err != nil {
		if s != nil {
			return violation("Stream returned a stream and an error")
		}
		return violation("Stream failed: %v", err)
	}
	if s == nil {
		return violation("Stream returned neither a stream nor an error")
	}
	var asm model.Assembler
	recvErr, v := readAll(s, o, &asm)
	if v != nil {
		_, _ = closeStream(s, o.wait, "Close")
		return v
	}
	if recvErr != nil {
		_, _ = closeStream(s, o.wait, "Close")
		return violation("Recv failed: %v", recvErr)
	}
	for i, what := range []string{"Close after io.EOF", "a second Close"} {
		err, v := closeStream(s, o.wait, what)
		if v != nil {
			return v
		}
		if err != nil {
			if i == 0 {
				return violation("%s returned %v, want nil", what, err)
			}
			return violation("%s returned %v; Close must be idempotent", what, err)
		}
	}
	resp, ok := asm.Response()
	if !ok {
		pr, _ := asm.Problem()
		return violation("the stream ended with a Failed item (%v), want Completed", pr)
	}
	m := resp.Message()
	switch {
	case wantCalls && m.NumCalls() == 0:
		return violation("the ToolCall setup completed without a tool call")
	case !wantCalls && m.NumCalls() > 0:
		return violation("the Text setup answered with %d tool calls, want text only", m.NumCalls())
	case !wantCalls && m.Text() == "":
		return violation("the Text setup answered without text")
	}
	return nil
}

// checkCancelMidStream cancels after the first item: the stream must end
// within o.prompt and leave no goroutine behind.
func checkCancelMidStream(p model.Provider, o options) error {
	snapshot := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err, v := open(ctx, p, o, o.wait)
	if v != nil {
		return v
	}
	if err != nil || s == nil {
		return violation("Stream failed: %v", err)
	}
	var asm model.Assembler
	it, err, v := recv(s, o.wait, "the first Recv")
	if v != nil {
		return v
	}
	if err != nil {
		_, _ = closeStream(s, o.wait, "Close")
		return violation("the first Recv failed: %v (the Slow setup must emit an item, then stall)", err)
	}
	if err := asm.Add(it); err != nil {
		return violation("K23: item 0: %v", err)
	}
	if it.IsTerminal() {
		return violation("the Slow setup ended its stream at once (%v); it must stall after an item", it.Kind())
	}
	cancel()
	if v := endAfterCancel(s, o, &asm); v != nil {
		return v
	}
	if _, v := closeStream(s, o.prompt, "Close after cancellation"); v != nil {
		return v
	}
	return leaked(snapshot, o, "the cancelled stream")
}

// endAfterCancel reads what a stream still returns after its context was
// cancelled: at most a few items, never Completed, ending in the
// context's error or a Failed item and io.EOF, all within o.prompt.
func endAfterCancel(s model.Stream, o options, asm *model.Assembler) error {
	deadline := time.Now().Add(o.prompt)
	for range 64 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		it, err, v := recv(s, left, "Recv after cancellation")
		if v != nil {
			return v
		}
		if err == io.EOF {
			if err := asm.End(); err != nil {
				return violation("K23: after cancellation: %v", err)
			}
			return nil
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				return violation("Recv after cancellation returned %v, which is not the context's error (errors.Is)", err)
			}
			return nil
		}
		if err := asm.Add(it); err != nil {
			return violation("K23: after cancellation: %v", err)
		}
		if it.Kind() == model.KindCompleted {
			return violation("the stream completed after cancellation; the Slow setup must stall until cancelled")
		}
	}
	return violation("the stream did not end within %v after cancellation", o.prompt)
}

// checkCancelBeforeStream calls Stream with a context that is already
// cancelled.
func checkCancelBeforeStream(p model.Provider, o options) error {
	snapshot := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err, v := open(ctx, p, o, o.prompt)
	if v != nil {
		return v
	}
	if err != nil {
		if s != nil {
			return violation("Stream returned a stream and an error")
		}
		var pe *model.ProviderError
		if !errors.As(err, &pe) {
			return violation("Stream's error is %T (%v), want *model.ProviderError", err, err)
		}
		if !errors.Is(err, context.Canceled) {
			return violation("Stream's error (%v) does not unwrap to context.Canceled", err)
		}
		return leaked(snapshot, o, "the cancelled Stream call")
	}
	if s == nil {
		return violation("Stream returned neither a stream nor an error")
	}
	var asm model.Assembler
	if v := endAfterCancel(s, o, &asm); v != nil {
		return v
	}
	if _, v := closeStream(s, o.prompt, "Close after cancellation"); v != nil {
		return v
	}
	return leaked(snapshot, o, "the cancelled stream")
}

// checkCloseWithoutRecv abandons a stream: Close alone, with the context
// still live, must release it.
func checkCloseWithoutRecv(p model.Provider, o options) error {
	snapshot := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err, v := open(ctx, p, o, o.wait)
	if v != nil {
		return v
	}
	if err != nil || s == nil {
		return violation("Stream failed: %v", err)
	}
	if _, v := closeStream(s, o.prompt, "Close before reading"); v != nil {
		return v
	}
	if _, v := closeStream(s, o.prompt, "a second Close"); v != nil {
		return v
	}
	return leaked(snapshot, o, "the closed stream")
}

func checkErrorBeforeStream(p model.Provider, o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err, v := open(ctx, p, o, o.wait)
	if v != nil {
		return v
	}
	if err == nil {
		if s != nil {
			_, _ = closeStream(s, o.wait, "Close")
		}
		return violation("Stream succeeded; the ErrorBeforeStream setup must make it fail")
	}
	if s != nil {
		return violation("Stream returned a stream and an error")
	}
	var pe *model.ProviderError
	if !errors.As(err, &pe) {
		return violation("Stream's error is %T (%v), want *model.ProviderError: only it carries retry advice", err, err)
	}
	switch {
	case pe.Problem().IsZero():
		return violation("the ProviderError has no problem; build it with model.NewProviderError")
	case pe.RetryAfter() < 0 || pe.RetryAfter() > model.MaxRetryAfter:
		return violation("the ProviderError advises a wait of %v, outside 0..%v", pe.RetryAfter(), model.MaxRetryAfter)
	case pe.RetryAfter() > 0 && !pe.Retryable():
		return violation("the ProviderError advises a wait but is not retryable")
	}
	return nil
}

// checkOversized reads a stream that goes past a kernel bound: every item
// must still be valid, and the stream must not complete.
func checkOversized(p model.Provider, o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err, v := open(ctx, p, o, o.wait)
	if v != nil {
		return v
	}
	if err != nil {
		var pe *model.ProviderError
		if s != nil || !errors.As(err, &pe) {
			return violation("Stream's error is %T (%v), want *model.ProviderError and no stream", err, err)
		}
		return nil
	}
	if s == nil {
		return violation("Stream returned neither a stream nor an error")
	}
	var asm model.Assembler
	recvErr, v := readAll(s, o, &asm)
	_, _ = closeStream(s, o.wait, "Close")
	if v != nil {
		return v
	}
	if recvErr == nil && asm.Terminal() == model.KindCompleted {
		return violation("K2: the Oversized setup completed; content past a bound must end the stream " +
			"with a Failed item or an error, never be truncated")
	}
	return nil
}

func leaked(snapshot goleak.Option, o options, what string) error {
	opts := append([]goleak.Option{snapshot}, o.leak...)
	if err := goleak.Find(opts...); err != nil {
		return violation("a goroutine outlived %s: %v", what, err)
	}
	return nil
}
