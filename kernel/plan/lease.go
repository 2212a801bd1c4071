package plan

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// DefaultReleaseTimeout bounds the wait for a release callback when
// LeaseConfig.ReleaseTimeout is zero.
const DefaultReleaseTimeout = 5 * time.Second

// LeaseConfig tunes a Lease. The zero value uses the defaults.
type LeaseConfig struct {
	// ReleaseTimeout is the longest Release waits for the release
	// callback; zero means DefaultReleaseTimeout, negative is an error.
	ReleaseTimeout time.Duration
	// Inline says the release callback is the source's own non-blocking
	// reference decrement, so Release runs it on the caller's goroutine:
	// still exactly once and with panics contained, but without a goroutine
	// and timer per release. Sources must not set it for callbacks they do
	// not control.
	Inline bool
}

// Lease pins one Plan to its holder until Release (K12, K14). The plan a
// lease carries never changes, whatever its Source activates later.
//
// Leases are made by Sources with NewLease, so every Source, including
// third-party ones, gets the same release guarantees.
type Lease struct {
	plan    Plan
	release func() error
	timeout time.Duration
	inline  bool

	started atomic.Bool // the first Release call has begun

	mu      sync.Mutex
	done    bool          // outcome is final
	outcome error         // valid once done
	settled chan struct{} // made by the first waiter; closed once done
}

// NewLease returns a lease on p whose Release runs release exactly once.
//
// release is the Source's reference decrement. It is meant to be quick and
// non-blocking; the bound in Release protects the caller, not the callback:
// a callback that outlives the bound keeps running on its own goroutine
// until it returns. A nil release means there is nothing to give back.
func NewLease(p Plan, release func() error, cfg LeaseConfig) (*Lease, error) {
	if p.IsZero() {
		return nil, bound.Missing("lease.plan")
	}
	timeout := cfg.ReleaseTimeout
	switch {
	case timeout == 0:
		timeout = DefaultReleaseTimeout
	case timeout < 0:
		return nil, bound.Malformedf("lease.release_timeout", "must not be negative")
	}
	if release == nil {
		release = func() error { return nil }
	}
	return &Lease{plan: p, release: release, timeout: timeout, inline: cfg.Inline}, nil
}

// Plan returns the leased plan.
func (l *Lease) Plan() Plan { return l.plan }

// Release gives the plan back. The release callback runs exactly once, on
// the first call, however many calls there are and from however many
// goroutines.
//
// The first call waits for the callback at most the lease's ReleaseTimeout
// and at most until ctx is done; that wait settles the lease's outcome:
// nil, or a *ReleaseError when the callback failed, panicked or did not
// return in time. A callback result that arrives after the outcome has
// settled is dropped. Every later call returns the same settled outcome; a
// later call whose ctx ends before the first call has settled returns a
// timed-out *ReleaseError of its own without changing the settled outcome.
func (l *Lease) Release(ctx context.Context) error {
	if l.started.CompareAndSwap(false, true) {
		if l.inline {
			l.call()
			return l.result()
		}
		settled := l.waitSettled() // before the callback can settle
		go l.call()
		t := time.AfterFunc(l.timeout, l.expire)
		select {
		case <-settled:
		case <-ctx.Done():
			l.settle(l.timedOut(ctx.Err()))
		}
		t.Stop()
		return l.result()
	}
	settled := l.waitSettled()
	if settled == nil {
		return l.result()
	}
	select {
	case <-settled:
		return l.result()
	case <-ctx.Done():
		return l.timedOut(ctx.Err())
	}
}

// waitSettled returns a channel that is closed once the outcome is final,
// or nil if it already is. The channel is made only for a caller that has
// to wait, so an inline release, the common case, never makes one.
func (l *Lease) waitSettled() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return nil
	}
	if l.settled == nil {
		l.settled = make(chan struct{})
	}
	return l.settled
}

// settle makes err the outcome unless one is already final. The callback
// goroutine, the lease's timer and the first caller's context race here;
// the first wins.
func (l *Lease) settle(err error) {
	l.mu.Lock()
	if !l.done {
		l.done, l.outcome = true, err
		if l.settled != nil {
			close(l.settled)
		}
	}
	l.mu.Unlock()
}

func (l *Lease) result() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcome
}

// expire runs when the lease's own bound passes.
func (l *Lease) expire() { l.settle(l.timedOut(context.DeadlineExceeded)) }

func (l *Lease) timedOut(cause error) error {
	return &ReleaseError{Plan: l.plan.ID(), Reason: ReleaseTimedOut, Timeout: l.timeout, Err: cause}
}

// call runs the callback on its own goroutine. A panic, or a callback that
// ends its goroutine with runtime.Goexit, becomes a ReleasePanicked error;
// the panic value is dropped because it may hold anything.
func (l *Lease) call() {
	returned := false
	defer func() {
		if !returned {
			recover()
			l.settle(&ReleaseError{Plan: l.plan.ID(), Reason: ReleasePanicked})
		}
	}()
	err := l.release()
	returned = true
	if err != nil {
		err = &ReleaseError{Plan: l.plan.ID(), Reason: ReleaseFailed, Err: err}
	}
	l.settle(err)
}

// ReleaseReason says why a release did not succeed.
type ReleaseReason uint8

const (
	// ReleaseFailed: the callback returned an error.
	ReleaseFailed ReleaseReason = iota + 1
	// ReleasePanicked: the callback panicked or exited its goroutine.
	ReleasePanicked
	// ReleaseTimedOut: the callback had not returned when the wait ended.
	ReleaseTimedOut
)

func (r ReleaseReason) String() string {
	switch r {
	case ReleaseFailed:
		return "failed"
	case ReleasePanicked:
		return "panicked"
	case ReleaseTimedOut:
		return "timed out"
	}
	return "release_reason(" + strconv.Itoa(int(r)) + ")"
}

// ReleaseError is the typed error of a release that did not succeed. The
// engine turns it into the run's one failed terminal (K14).
//
// Err is the cause: the callback's own error for ReleaseFailed; ctx.Err()
// or context.DeadlineExceeded (the lease's own bound) for ReleaseTimedOut;
// nil for ReleasePanicked. Error() never includes the callback's error text
// or panic value, so a secret in either cannot leak into a terminal event;
// callers that want the cause use errors.Unwrap or errors.Is.
type ReleaseError struct {
	Plan    ID
	Reason  ReleaseReason
	Timeout time.Duration // the lease's bound, for ReleaseTimedOut
	Err     error
}

func (e *ReleaseError) Error() string {
	s := "plan lease release " + e.Reason.String() + " (plan " + string(e.Plan)
	if e.Reason == ReleaseTimedOut {
		s += ", bound " + e.Timeout.String()
	}
	return s + ")"
}

// Unwrap returns the cause.
func (e *ReleaseError) Unwrap() error { return e.Err }
