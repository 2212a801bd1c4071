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
	if n := tk.queued(); n != 0 {
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
		if tk.state() != tokenHeld {
			t.Fatal("the waiter returned without the token")
		}
	})
}

// A waiter whose context ends gives up and leaves the queue; the holder
// still holds the token and nobody else gets it.
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
		if tk.queued() != 0 || tk.state() != tokenHeld {
			t.Fatalf("after a give-up: %d queued, state %d; want 0 queued, held", tk.queued(), tk.state())
		}
		tk.release()
		if tk.state() != tokenFree {
			t.Fatal("a release with nobody waiting left the token taken")
		}
	})
}

// An appender that takes the token back to back cannot starve a waiter:
// a give-back while someone waits hands the token to the longest waiter.
func TestK17_TokenIsFairToAWaiterWithABound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tk := newToken()
		stop, holding := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if tk.acquire(context.Background()) != nil {
					return
				}
				if i == 0 {
					close(holding)
				}
				time.Sleep(20 * time.Microsecond) // an observer at work
				tk.release()
			}
		})
		<-holding // every acquire below has to wait for the other appender
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			err := tk.acquire(ctx)
			cancel()
			if err != nil {
				t.Fatalf("a waiter bounded to 100ms gave up behind a holder that holds 20µs at a time: %v", err)
			}
			tk.release()
		}
		close(stop)
		wg.Wait()
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
	if tk.state() != tokenFree || tk.queued() != 0 {
		t.Fatalf("state %d, %d queued after every appender finished", tk.state(), tk.queued())
	}
	if entered < 8*500*6/7-8 {
		t.Fatalf("only %d of %d acquisitions without a deadline succeeded", entered, 8*500)
	}
}

// newToken returns a free token, as a log with observers holds.
func newToken() *token {
	t := new(token)
	t.init()
	return t
}

// queued returns how many appenders wait for t.
func (t *token) queued() int { return int(t.waiting.Load()) }

const (
	tokenFree int32 = iota
	tokenHeld
)

// state reports whether the token is free or held.
func (t *token) state() int32 {
	if len(t.slot) == 1 {
		return tokenHeld
	}
	return tokenFree
}
