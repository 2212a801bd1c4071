package eventlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func expiredCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// A free token is taken even with a done context; a held one is not, and
// the waiter gets its context's error.
func TestK17_TokenPrefersTheTokenOverADoneContext(t *testing.T) {
	tk := newToken()
	if err := tk.acquire(expiredCtx()); err != nil {
		t.Fatalf("acquire of a free token with a done context: %v", err)
	}
	if err := tk.acquire(expiredCtx()); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire of a held token = %v, want context.Canceled", err)
	}
	if n := tk.waiters.Load(); n != 0 {
		t.Fatalf("%d waiters left after giving up", n)
	}
	tk.release()
	if err := tk.acquire(context.Background()); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

// A waiter parks until the token is given back, then takes it.
func TestK17_TokenWakesAWaiterOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := newToken()
		if err := tk.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { got <- tk.acquire(context.Background()) }()
		synctest.Wait() // the waiter is parked
		select {
		case err := <-got:
			t.Fatalf("acquire returned %v while the token was held", err)
		default:
		}
		tk.release()
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if !tk.held.Load() {
			t.Fatal("the waiter returned without the token")
		}
	})
}

// A waiter whose context ends gives up; a wake left behind does not let
// anyone take a held token.
func TestK17_TokenWaiterGivesUpOnItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := newToken()
		if err := tk.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := tk.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire = %v, want context.DeadlineExceeded", err)
		}
		tk.wake <- struct{}{} // a stale wake
		short, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		if err := tk.acquire(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a stale wake let acquire take a held token: %v", err)
		}
	})
}

// Many appenders, some giving up: every holder is alone, and nobody is
// left waiting on a free token.
func TestK17_TokenExcludesUnderContention(t *testing.T) {
	tk := newToken()
	var (
		wg      sync.WaitGroup
		inside  int // guarded by tk; the race detector checks it
		entered int
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				ctx := context.Background()
				if (g+i)%7 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Microsecond)
					defer cancel()
				}
				if tk.acquire(ctx) != nil {
					continue
				}
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				entered++
				inside--
				tk.release()
			}
		})
	}
	wg.Wait()
	if tk.held.Load() || tk.waiters.Load() != 0 {
		t.Fatalf("held %v, waiters %d after every appender finished", tk.held.Load(), tk.waiters.Load())
	}
	if entered < 8*500*6/7-8 {
		t.Fatalf("only %d of %d acquisitions without a deadline succeeded", entered, 8*500)
	}
}
