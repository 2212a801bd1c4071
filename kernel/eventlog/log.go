package eventlog

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// Config configures a Log. New copies it.
type Config struct {
	// MaxEvents and MaxBytes bound the retained events by count and by
	// encoded bytes (K18). Both are required.
	MaxEvents int
	MaxBytes  int
	// ReserveEvents and ReserveBytes are kept for terminal events: a
	// non-terminal event may only use MaxEvents-ReserveEvents events and
	// MaxBytes-ReserveBytes bytes, so the terminals that close a lifecycle
	// fit without evicting the history before them.
	ReserveEvents int
	ReserveBytes  int
	// MaxLag, if not 0, is how many events a subscriber may be behind the
	// last committed one. A slower subscriber is disconnected with an
	// *ExhaustedError; a cursor further back is refused by Subscribe.
	MaxLag int
	// Required observers are called in order, after the local commit, on
	// the appending goroutine. They may block (backpressure).
	Required []Observer
	// BestEffort observers are told after every required observer accepted,
	// through a bounded mailbox each and one goroutine each. A full mailbox
	// drops the event and counts it; it never blocks Append.
	BestEffort []Observer
	// Mailbox is each best-effort observer's mailbox size; 0 means 64.
	Mailbox int
	// Name names the log for observers shared by many logs (Event.Log):
	// the engine uses the run ID. Optional; an identifier when set.
	Name string
	// After is the sequence the log continues from: its first event gets
	// After+1. A run resumed from a snapshot continues its sequence this
	// way instead of restarting at 1 (K29).
	After uint64
	// Capacity is how many events the log makes room for when it stores
	// its first one; the room then doubles as needed, up to MaxEvents. It
	// is only a hint that saves growing: it never changes what the log
	// retains. 0 means 16; a value above MaxEvents means MaxEvents.
	Capacity int
}

const (
	defaultMailbox  = 64
	defaultCapacity = 16
)

func (c Config) validate() error {
	switch {
	case c.MaxEvents <= 0:
		return bound.Malformedf("eventlog.max_events", "must be at least 1")
	case c.MaxBytes <= 0:
		return bound.Malformedf("eventlog.max_bytes", "must be at least 1")
	case c.ReserveEvents < 0 || c.ReserveEvents >= c.MaxEvents:
		return bound.Conflicting("eventlog.reserve_events", "must be at least 0 and below max_events")
	case c.ReserveBytes < 0 || c.ReserveBytes >= c.MaxBytes:
		return bound.Conflicting("eventlog.reserve_bytes", "must be at least 0 and below max_bytes")
	case c.MaxLag < 0:
		return bound.Malformedf("eventlog.max_lag", "must not be negative")
	case c.Mailbox < 0:
		return bound.Malformedf("eventlog.mailbox", "must not be negative")
	case c.Capacity < 0:
		return bound.Malformedf("eventlog.capacity", "must not be negative")
	}
	if c.Name != "" {
		if err := id.Check("eventlog.name", c.Name); err != nil {
			return err
		}
	}
	for _, o := range c.Required {
		if o == nil {
			return bound.Missing("eventlog.required[]")
		}
	}
	for _, o := range c.BestEffort {
		if o == nil {
			return bound.Missing("eventlog.best_effort[]")
		}
	}
	return nil
}

// Log is a strictly sequenced, bounded, observable event log. It is safe for
// concurrent use. The first event has sequence 1 and every next one exactly
// one more; a sequence, once committed, is never reused (K15, K16).
type Log struct {
	// Every run has a log, so it keeps only what it reads after New.
	lim limits

	// pub serializes commit plus publication when there are observers, so
	// every observer sees sequences in order; unused without observers.
	pub      token
	observed bool        // the log has observers: appends take pub
	closed   bool        // no more appends; guarded by mu
	be       *bestEffort // nil without best-effort observers

	mu    sync.Mutex
	ring  []entry // retained events, oldest at head, grown up to MaxEvents
	head  int
	count int
	bytes int
	last  uint64        // last committed sequence
	wake  chan struct{} // made only while a subscriber waits; closed on change
	stats counters      // guarded by mu

	observerFailures atomic.Uint64
}

// limits is what a log reads of its Config after New.
type limits struct {
	maxEvents, maxBytes         int
	reserveEvents, reserveBytes int
	maxLag, capacity            int
	name                        string
	required                    []Observer
}

// counters are the Stats a log counts under its mutex.
type counters struct {
	evictions, rejected, outOfRange, exhaustions, slowDisconnects uint64
}

// New validates cfg and returns an empty log. If cfg has best-effort
// observers, New starts one goroutine for each; Close stops them.
func New(cfg Config) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Mailbox == 0 {
		cfg.Mailbox = defaultMailbox
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = defaultCapacity
	}
	l := &Log{last: cfg.After, lim: limits{
		maxEvents: cfg.MaxEvents, maxBytes: cfg.MaxBytes,
		reserveEvents: cfg.ReserveEvents, reserveBytes: cfg.ReserveBytes,
		maxLag: cfg.MaxLag, capacity: cfg.Capacity, name: cfg.Name,
		required: append([]Observer(nil), cfg.Required...),
	}}
	if len(cfg.Required)+len(cfg.BestEffort) > 0 {
		l.observed = true
		l.pub.init()
	}
	if len(cfg.BestEffort) == 0 {
		return l, nil
	}
	be := &bestEffort{stop: make(chan struct{})}
	be.ctx, be.cancel = context.WithCancel(context.Background())
	for _, o := range cfg.BestEffort {
		m := &mailbox{o: o, events: make(chan Event, cfg.Mailbox), done: make(chan struct{})}
		be.mailboxes = append(be.mailboxes, m)
	}
	l.be = be
	for _, m := range be.mailboxes {
		go m.run(l)
	}
	return l, nil
}

// Append assigns the next sequence to r, commits it to the log, and then
// tells the required observers in order and the best-effort ones after
// them.
//
// Without a committed event Append returns a zero Event and an error: a
// *bound.Error for an invalid record or one too large for the log, ErrClosed,
// or the context's error while waiting for an earlier append's observers.
// When a required observer fails, the event stays committed: Append returns
// it with an *ObserverError, and the caller reports the failure with a later
// event (K16).
//
// Observers must not append to the same log from inside Observe.
func (l *Log) Append(ctx context.Context, r Record) (Event, error) {
	size, err := r.check()
	if err != nil {
		return Event{}, err
	}
	// The event is built once and filled in place: an Event is large
	// enough that copying it through every call costs more than the
	// commit itself.
	e := Event{kind: r.Kind, time: r.Time.UTC(), payload: r.Payload, size: size}
	var committed bool
	if !l.observed {
		err = l.commit(&e, r.Terminal)
		committed = err == nil
	} else {
		committed, err = l.commitAndPublish(ctx, &e, r.Terminal)
	}
	if !committed {
		return Event{}, err
	}
	return e, err
}

// commitAndPublish holds the publication token across commit and
// publication, so observers see sequences in order. It reports whether e
// was committed: an observer's error leaves it committed.
func (l *Log) commitAndPublish(ctx context.Context, e *Event, terminal bool) (committed bool, err error) {
	if err := l.pub.acquire(ctx); err != nil {
		return false, err
	}
	defer l.pub.release()
	if err := l.commit(e, terminal); err != nil {
		return false, err
	}
	return true, l.publish(ctx, *e)
}

// commit assigns the sequence, evicts what the class of e may not keep, and
// stores e, filling in its sequence, log name and full size. Only here is a
// sequence consumed, and only when it returns nil.
func (l *Log) commit(e *Event, terminal bool) error {
	maxEvents, maxBytes := l.lim.maxEvents, l.lim.maxBytes
	if !terminal {
		maxEvents -= l.lim.reserveEvents
		maxBytes -= l.lim.reserveBytes
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.last == math.MaxUint64 {
		// A sequence is never reused (K15): past the last one, nothing
		// more can be committed.
		l.stats.rejected++
		l.mu.Unlock()
		return bound.Conflicting("event.seq", "the log has used its last sequence number")
	}
	seq := l.last + 1
	size := e.size + UintLen(seq)
	if size > maxBytes || size > MaxEventBytes {
		l.stats.rejected++
		l.mu.Unlock()
		return &bound.Error{Field: "event", Rule: bound.TooLarge,
			Limit: min(maxBytes, MaxEventBytes), Got: size,
			Detail: "the encoded event does not fit in the log"}
	}
	e.seq, e.log, e.size = seq, l.lim.name, size
	for l.count > 0 && (l.count >= maxEvents || l.bytes+size > maxBytes) {
		l.evictOldestLocked()
	}
	l.pushLocked(e)
	l.last = seq
	l.signalLocked()
	l.mu.Unlock()
	return nil
}

func (l *Log) pushLocked(e *Event) {
	if l.count == len(l.ring) {
		n := min(max(2*len(l.ring), l.lim.capacity), l.lim.maxEvents)
		ring := make([]entry, n)
		k := copy(ring, l.ring[l.head:])
		copy(ring[k:], l.ring[:l.head])
		l.ring, l.head = ring, 0
	}
	l.ring[l.slotLocked(l.count)] = entry{kind: e.kind, payload: e.payload, sec: e.time.Unix(), nsec: int32(e.time.Nanosecond()), size: int32(e.size)}
	l.count++
	l.bytes += e.size
}

func (l *Log) evictOldestLocked() {
	l.bytes -= int(l.ring[l.head].size)
	l.ring[l.head] = entry{} // drop the payload reference
	l.head = l.slotLocked(1)
	l.count--
	l.stats.evictions++
}

// slotLocked returns the ring index of the i-th retained event.
func (l *Log) slotLocked(i int) int {
	j := l.head + i
	if j >= len(l.ring) {
		j -= len(l.ring)
	}
	return j
}

// firstLocked returns the oldest retained sequence (last+1 when empty).
func (l *Log) firstLocked() uint64 { return l.last - uint64(l.count) + 1 }

// atLocked returns the retained event with sequence seq,
// firstLocked() <= seq <= last.
func (l *Log) atLocked(seq uint64) Event {
	s := &l.ring[l.slotLocked(int(seq-l.firstLocked()))]
	return Event{log: l.lim.name, seq: seq, kind: s.kind, time: time.Unix(s.sec, int64(s.nsec)).UTC(),
		payload: s.payload, size: int(s.size)}
}

// entry is a retained event as the ring stores it: the sequence follows
// from the position and the log's name from its config, and a valid time
// (year 0000 to 9999, UTC, no monotonic reading) is exactly its Unix
// seconds and nanoseconds. That makes a slot about half the size of an
// Event, which halves what every log allocates for its ring.
type entry struct {
	kind    string
	payload Payload
	sec     int64
	nsec    int32
	size    int32 // at most MaxEventBytes
}

// signalLocked wakes every waiting subscriber.
func (l *Log) signalLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// Close refuses further appends, waits for an append that is telling its
// observers, lets the best-effort observers finish what their mailboxes
// hold, and ends subscriptions once they have read every retained event.
// If ctx ends first, Close cancels the context given to best-effort
// observers, drops what they have not started, and returns ctx's error; a
// later Close waits again. Close is idempotent.
func (l *Log) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	l.signalLocked()
	l.mu.Unlock()
	if !l.observed {
		return nil
	}
	err := l.pub.acquire(ctx)
	if err == nil {
		l.pub.release()
	}
	be := l.be
	if be == nil {
		return err
	}
	be.stopOnce.Do(func() { close(be.stop) })
	for _, m := range be.mailboxes {
		if err != nil {
			break
		}
		select {
		case <-m.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	be.cancel()
	return err
}

// Stats reports the log's health (K20).
type Stats struct {
	RetainedEvents  int
	RetainedBytes   int
	FirstSeq        uint64 // oldest retained sequence; LastSeq+1 when none is
	LastSeq         uint64 // last committed sequence
	Evictions       uint64 // events evicted to make room
	Rejected        uint64 // appends refused as too large for the log
	OutOfRange      uint64 // Subscribe calls refused with *OutOfRangeError
	Exhaustions     uint64 // subscriptions ended because their next event was evicted
	SlowDisconnects uint64 // subscriptions ended for lagging more than MaxLag
	// ObserverFailures counts required-observer errors and panics.
	ObserverFailures uint64
	// BestEffortDrops counts events a best-effort observer never saw: its
	// mailbox was full, or Close gave up on it.
	BestEffortDrops uint64
	// BestEffortFailures counts best-effort observer errors and panics.
	BestEffortFailures uint64
}

// Stats returns a snapshot of the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	c := l.stats
	s := Stats{
		RetainedEvents: l.count, RetainedBytes: l.bytes, FirstSeq: l.firstLocked(), LastSeq: l.last,
		Evictions: c.evictions, Rejected: c.rejected, OutOfRange: c.outOfRange,
		Exhaustions: c.exhaustions, SlowDisconnects: c.slowDisconnects,
	}
	l.mu.Unlock()
	s.ObserverFailures = l.observerFailures.Load()
	if l.be != nil {
		s.BestEffortDrops = l.be.drops.Load()
		s.BestEffortFailures = l.be.fails.Load()
	}
	return s
}
