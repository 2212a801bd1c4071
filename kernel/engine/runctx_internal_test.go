package engine

import (
	"context"
	"errors"
	"testing"
)

// runCtx is context.WithCancelCause of the caller's context, cancelled
// with no cause of its own. These tests pin the two choices that makes:
// which end, and which cause, a run context reports when the caller's
// context and the run both end it.

func TestK24_RunCtxCancelAfterTheCallerEndedReportsTheCaller(t *testing.T) {
	cause := errors.New("host going away")
	caller, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	c := newRunCtx(caller)
	c.cancel() // before anything polled the caller
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", err)
	}
	if got := context.Cause(c); !errors.Is(got, cause) {
		t.Fatalf("Cause = %v, want the caller's cause", got)
	}
}

// The run cancelled itself first: its cause stays context.Canceled when the
// caller's context ends later with a cause, as with context.WithCancel.
func TestK24_RunCtxCauseStaysTheRunsOwn(t *testing.T) {
	host := errors.New("host going away")
	caller, cancelCaller := context.WithCancelCause(context.Background())
	c := newRunCtx(caller)
	c.cancel()
	cancelCaller(host)
	if got := context.Cause(c); !errors.Is(got, context.Canceled) || errors.Is(got, host) {
		t.Fatalf("Cause = %v, want context.Canceled", got)
	}
	derived, cancel := context.WithCancel(c)
	defer cancel()
	if got := context.Cause(derived); !errors.Is(got, context.Canceled) {
		t.Fatalf("Cause of a context derived after the end = %v, want context.Canceled", got)
	}
}
