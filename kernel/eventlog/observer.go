package eventlog

import (
	"context"
	"sync"
	"sync/atomic"
)

// Observer is told about committed events.
//
// A required observer is called on the appending goroutine with the
// appender's context and may block to apply backpressure; its error or panic
// becomes an *ObserverError, but the event stays committed. A best-effort
// observer is called on its own goroutine with a context that Close cancels
// when it gives up waiting; its errors and panics are only counted.
//
// Observers must return when their context ends and must not append to the
// log that calls them.
type Observer interface {
	Observe(ctx context.Context, e Event) error
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event) error

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) error { return f(ctx, e) }

// observe calls o and turns a panic into ErrObserverPanic.
func observe(ctx context.Context, o Observer, e Event) (err error) {
	defer func() {
		if recover() != nil {
			err = ErrObserverPanic
		}
	}()
	return o.Observe(ctx, e)
}

// publish tells the required observers in order, stopping at the first that
// fails, and then offers e to every best-effort mailbox (K16, K17). The
// caller holds the publication token.
func (l *Log) publish(ctx context.Context, e Event) error {
	for i, o := range l.lim.required {
		if err := observe(ctx, o, e); err != nil {
			l.observerFailures.Add(1)
			// Best-effort observers never get an event a required one
			// refused (K17); for them it is dropped, and counted (K20).
			if l.be != nil {
				l.be.drops.Add(uint64(len(l.be.mailboxes)))
			}
			return &ObserverError{Seq: e.Seq(), Observer: i, Err: err}
		}
	}
	if l.be != nil {
		for _, m := range l.be.mailboxes {
			m.offer(l, e)
		}
	}
	return nil
}

// bestEffort is what a log with best-effort observers has besides: their
// mailboxes and what stops them. A log without them does not carry it.
type bestEffort struct {
	mailboxes []*mailbox
	stop      chan struct{} // closed by Close: the goroutines drain and exit
	stopOnce  sync.Once
	ctx       context.Context // given to the observers; Close cancels it
	cancel    context.CancelFunc
	drops     atomic.Uint64 // events a best-effort observer never saw (Stats)
	fails     atomic.Uint64 // best-effort observer errors and panics (Stats)
}

// mailbox is one best-effort observer's bounded queue and goroutine.
type mailbox struct {
	o      Observer
	events chan Event
	done   chan struct{} // closed when the goroutine exits
}

// offer queues e or counts it as dropped; it never blocks.
func (m *mailbox) offer(l *Log, e Event) {
	select {
	case <-l.be.stop: // only after a Close that gave up waiting for this append
		l.be.drops.Add(1)
		return
	default:
	}
	select {
	case m.events <- e:
	default:
		l.be.drops.Add(1)
	}
}

func (m *mailbox) run(l *Log) {
	defer close(m.done)
	for {
		select {
		case e := <-m.events:
			m.deliver(l, e)
		case <-l.be.stop:
			for {
				select {
				case e := <-m.events:
					m.deliver(l, e)
				default:
					return
				}
			}
		}
	}
}

func (m *mailbox) deliver(l *Log, e Event) {
	if l.be.ctx.Err() != nil {
		l.be.drops.Add(1)
		return
	}
	if observe(l.be.ctx, m.o, e) != nil {
		l.be.fails.Add(1)
	}
}
