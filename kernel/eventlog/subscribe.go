package eventlog

import (
	"context"
	"io"
	"iter"
)

// Subscription is an independent cursor over a log: it replays retained
// events after its starting cursor and then tails new ones, with no gap and
// no duplicate (K19). It reads straight from the log's retained events, so
// appends never wait for it and a subscriber costs nothing while it is not
// reading. It is safe for concurrent use; concurrent Next calls each get a
// different event.
type Subscription struct {
	log  *Log
	ctx  context.Context // from Subscribe
	next uint64          // next sequence to deliver; guarded by log.mu
	err  error           // sticky end; guarded by log.mu
	stop func() bool
}

// Subscribe returns a subscription that delivers every event after afterSeq
// (0 means from the first). afterSeq must be in the window the log serves:
// from the oldest retained sequence minus one (and no further back than
// MaxLag) up to the last committed sequence; otherwise Subscribe returns an
// *OutOfRangeError with a recovery cursor.
//
// The subscription ends, with ctx's error, when ctx ends; Close ends it
// earlier. A closed log can still be subscribed to and read to its end.
func (l *Log) Subscribe(ctx context.Context, afterSeq uint64) (*Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	if low := l.lowCursorLocked(); afterSeq < low || afterSeq > l.last {
		rec := low
		if afterSeq > l.last {
			rec = l.last
		}
		l.stats.outOfRange++
		l.mu.Unlock()
		return nil, &OutOfRangeError{LastDelivered: afterSeq, Recovery: rec}
	}
	s := &Subscription{log: l, ctx: ctx, next: afterSeq + 1}
	l.mu.Unlock()
	if ctx.Done() != nil {
		// Wakes a waiting Next; Next itself checks ctx first.
		s.stop = context.AfterFunc(ctx, func() { s.end(ctx.Err()) })
	}
	return s, nil
}

// lowCursorLocked returns the oldest cursor the log serves now.
func (l *Log) lowCursorLocked() uint64 {
	low := l.firstLocked() - 1
	if lag := uint64(l.lim.maxLag); lag > 0 && l.last > lag {
		low = max(low, l.last-lag)
	}
	return low
}

// end records err as the subscription's end unless it already ended.
func (s *Subscription) end(err error) {
	l := s.log
	l.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	l.signalLocked()
	l.mu.Unlock()
}

// Next returns the next event, waiting for one if the subscriber is caught
// up. A done ctx ends only this call, even when an event is ready: the
// cursor is unchanged and a later Next continues without a gap.
//
// The end of the subscription is sticky: an *ExhaustedError when it fell
// behind (the log never waits for it), io.EOF after the last event of a
// closed log, ErrSubscriptionClosed, or the Subscribe context's error.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	l := s.log
	l.mu.Lock()
	for {
		if s.err == nil {
			if err := s.ctx.Err(); err != nil {
				s.err = err
			} else {
				s.checkLocked()
			}
		}
		if s.err != nil {
			err := s.err
			l.mu.Unlock()
			return Event{}, err
		}
		if s.next <= l.last {
			e := l.atLocked(s.next)
			s.next++
			l.mu.Unlock()
			return e, nil
		}
		if l.wake == nil {
			l.wake = make(chan struct{})
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
		l.mu.Lock()
	}
}

// checkLocked ends a subscription that fell behind or reached the end of a
// closed log.
func (s *Subscription) checkLocked() {
	l := s.log
	switch {
	case s.next < l.firstLocked():
		l.stats.exhaustions++
		s.err = &ExhaustedError{Reason: Evicted, LastDelivered: s.next - 1, Recovery: l.lowCursorLocked()}
	case l.lim.maxLag > 0 && l.last-(s.next-1) > uint64(l.lim.maxLag):
		l.stats.slowDisconnects++
		s.err = &ExhaustedError{Reason: Lagged, LastDelivered: s.next - 1, Recovery: l.lowCursorLocked()}
	case l.closed && s.next > l.last:
		s.err = io.EOF
	}
}

// LastDelivered returns the last sequence Next delivered, or the starting
// cursor if it delivered none. It is the cursor to resubscribe with.
func (s *Subscription) LastDelivered() uint64 {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.next - 1
}

// Close ends the subscription; a waiting Next returns ErrSubscriptionClosed.
// It is idempotent and never fails.
func (s *Subscription) Close() {
	if s.stop != nil {
		s.stop()
	}
	s.end(ErrSubscriptionClosed)
}

// All yields every event until the subscription ends or ctx is done. It ends
// silently on io.EOF (a closed log fully read) and yields any other ending
// error once, with a zero Event.
func (s *Subscription) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			e, err := s.Next(ctx)
			if err == io.EOF {
				return
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}
