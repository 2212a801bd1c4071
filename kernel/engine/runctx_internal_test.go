package engine

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type ctxKey struct{}

func TestK24_RunCtxLiveUntilCancelled(t *testing.T) {
	caller := context.WithValue(context.Background(), ctxKey{}, "v")
	c := newRunCtx(caller)
	if err := c.Err(); err != nil {
		t.Fatalf("Err = %v before any cancellation", err)
	}
	if c.Value(ctxKey{}) != "v" {
		t.Fatal("Value does not reach the caller")
	}
	if _, ok := c.Deadline(); ok {
		t.Fatal("Deadline set without one on the caller")
	}
	done := c.Done()
	select {
	case <-done:
		t.Fatal("Done closed while live")
	default:
	}
	c.cancel()
	<-done
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v after cancel, want context.Canceled", err)
	}
	if c.Done() != done {
		t.Fatal("Done changed after the end")
	}
	if got := context.Cause(c); !errors.Is(got, context.Canceled) {
		t.Fatalf("Cause = %v, want context.Canceled", got)
	}
}

// Nobody asked for Done: the caller's end is still seen by the next Err,
// with the caller's error, and Done is closed by then.
func TestK24_RunCtxSeesTheCallersEndWithoutAWatch(t *testing.T) {
	caller, cancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel()
	c := newRunCtx(caller)
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want the caller's context.DeadlineExceeded", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done open after Err reported the end")
	}
	if d, ok := c.Deadline(); !ok || !d.Equal(time.Unix(1, 0)) {
		t.Fatalf("Deadline = %v %v, want the caller's", d, ok)
	}
	// A later cancel keeps the first cause.
	c.cancel()
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v after a later cancel, want context.DeadlineExceeded", err)
	}
}

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

func TestK24_RunCtxDoneFollowsTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caller, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newRunCtx(caller)
		done := c.Done()
		time.Sleep(time.Minute) // synctest: the caller's deadline passes
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Done open after the caller's deadline")
		}
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err = %v, want context.DeadlineExceeded", err)
		}
	})
}

// Contexts derived from a run's context (a provider's request context, a
// tool's), directly or through a value, end with it before its cancel
// returns, and register with it rather than starting a goroutine each.
func TestK24_RunCtxDerivedContextsEndWithTheRun(t *testing.T) {
	c := newRunCtx(context.Background())
	before := runtime.NumGoroutine()
	var derived []context.Context
	for range 50 {
		d, cancel := context.WithTimeout(c, time.Hour)
		defer cancel()
		w, cancelW := context.WithTimeout(context.WithValue(c, ctxKey{}, 1), time.Hour)
		defer cancelW()
		derived = append(derived, d, w)
	}
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	stopped := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Fatal("stop of a pending AfterFunc reported false")
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Fatalf("deriving 100 contexts and an AfterFunc started %d goroutines", n)
	}
	c.cancel()
	for i, d := range derived {
		if err := d.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("derived context %d: Err = %v right after the run's cancel, want context.Canceled", i, err)
		}
	}
	<-ran
}

func TestK24_RunCtxAfterFuncOnAnEndedContextRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newRunCtx(context.Background())
		c.cancel()
		ran := make(chan struct{})
		stop := context.AfterFunc(c, func() { close(ran) })
		<-ran
		if stop() {
			t.Fatal("stop reported true for a func that ran")
		}
	})
}

// The caller's end reaches funcs registered on the run context through the
// watch the first registration set up.
func TestK24_RunCtxCallersEndRunsRegisteredFuncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caller, cancel := context.WithCancel(context.Background())
		c := newRunCtx(caller)
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		cancel()
		<-ran
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v, want context.Canceled", err)
		}
	})
}

func TestK24_RunCtxConcurrentUse(t *testing.T) {
	for range 50 {
		caller, cancelCaller := context.WithCancel(context.Background())
		c := newRunCtx(caller)
		var wg sync.WaitGroup
		wg.Add(4)
		go func() { defer wg.Done(); c.cancel() }()
		go func() { defer wg.Done(); cancelCaller() }()
		go func() { defer wg.Done(); <-c.Done() }()
		go func() {
			defer wg.Done()
			for c.Err() == nil {
			}
			select {
			case <-c.Done():
			default:
				t.Error("Err reported the end before Done was closed")
			}
		}()
		wg.Wait()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err = %v", err)
		}
	}
}

// A context derived from the run's context while the run cancels itself
// must never see Done closed with Err still nil: context.WithCancel panics
// ("missing cancel error") when it does, and a provider deriving its
// request context would fail the run instead of cancelling it.
func TestK24_RunCtxDoneClosedMeansErrSet(t *testing.T) {
	for range 2000 {
		c := newRunCtx(context.Background())
		c.Done()
		var (
			wg       sync.WaitGroup
			panicked any
			spinning = make(chan struct{})
		)
		wg.Go(func() {
			defer func() { panicked = recover() }()
			close(spinning)
			// Bounded, so that on one CPU cancel still runs once the
			// loop is done; on more, the two overlap.
			for range 200 {
				_, cancel := context.WithCancel(c)
				cancel()
				select {
				case <-c.Done():
					if c.Err() == nil {
						panic("Done closed while Err is nil")
					}
				default:
				}
			}
		})
		<-spinning
		c.cancel()
		wg.Wait()
		if panicked != nil {
			t.Fatalf("deriving from a run context being cancelled: %v", panicked)
		}
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
