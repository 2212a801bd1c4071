package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// sink is where a stream writes: SSE frames or JSON lines.
type sink interface {
	// event writes e; more says that another event is ready, so the
	// write need not be flushed yet.
	event(e eventlog.Event, more bool) error
	// outOfRange tells the client its cursor cannot be served and where
	// to resume; the stream goes on from recovery.
	outOfRange(last, recovery uint64) error
	heartbeat() error
	// end follows the last event: the pair ended in state.
	end(state string, last uint64) error
}

// errSlow ends a stream whose client fell StreamLag events behind.
var errSlow = errors.New("server: stream client too slow")

// cursor reads the stream's starting point: Last-Event-ID, which a
// reconnecting EventSource sends, else ?after=N, else 0.
func cursor(r *http.Request) (uint64, bool) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, true
	}
	if len(v) > 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// openStream checks the pair and the cursor, takes a stream slot and
// returns what the stream needs; on false it has answered already.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (e *entry, after uint64, release func(), ok bool) {
	pairID := r.PathValue("id")
	after, ok = cursor(r)
	if !ok {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "after", Message: "after / Last-Event-ID: must be a sequence number"})
		return nil, 0, nil, false
	}
	if e = s.lookup(pairID); e == nil {
		if _, err := s.cfg.Store.Pair(r.Context(), pairID); err != nil {
			s.storeError(w, err)
			return nil, 0, nil, false
		}
	}
	select {
	case s.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusServiceUnavailable, codeTooManyStreams, "too many open streams; retry later")
		return nil, 0, nil, false
	}
	return e, after, func() {
		<-s.streams
		if f := s.released.Load(); f != nil {
			(*f)()
		}
	}, true
}

// streamContext ends with the request or with Close.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// stream writes the pair's timeline after the cursor to out: from the
// feed while the server keeps the pair in memory, from the store
// otherwise or for events the feed no longer holds. Every event written
// is durable, written once, in sequence order.
func (s *Server) stream(ctx context.Context, pairID string, e *entry, after uint64, out sink) error {
	for {
		if e == nil || e.feed.broken.Load() {
			return s.fromStore(ctx, pairID, after, out, true)
		}
		sub, err := e.feed.log.Subscribe(ctx, after)
		var oor *eventlog.OutOfRangeError
		if errors.As(err, &oor) {
			if after > oor.Recovery {
				// A cursor past the last durable event.
				return out.outOfRange(after, oor.Recovery)
			}
			// Older than the feed keeps, or than a stream may lag: the
			// store has every event the feed was told.
			last, err := s.replay(ctx, pairID, after, out)
			if err != nil {
				return err
			}
			if last == after {
				if err := out.outOfRange(after, oor.Recovery); err != nil {
					return err
				}
				last = oor.Recovery
			}
			after = last
			continue
		}
		if err != nil {
			return err
		}
		if s.tail() {
			defer s.tailing.Done()
		}
		_, err = s.tailFeed(ctx, e, sub, after, out)
		sub.Close()
		return err
	}
}

// tailFeed writes what sub delivers until the feed ends, with heartbeats
// while it waits.
func (s *Server) tailFeed(ctx context.Context, e *entry, sub *eventlog.Subscription, after uint64, out sink) (uint64, error) {
	ended := false // the last event written is the pair's terminal
	for {
		nctx, cancel := ctx, context.CancelFunc(func() {})
		ready := sub.LastDelivered() < e.feed.log.Stats().LastSeq
		if !ready && s.cfg.Heartbeat > 0 {
			nctx, cancel = context.WithTimeout(ctx, s.cfg.Heartbeat)
		}
		ev, err := sub.Next(nctx)
		cancel()
		switch {
		case err == nil:
			after, ended = ev.Seq(), orchestrator.Terminal(ev.Kind())
			more := after < e.feed.log.Stats().LastSeq
			if err := out.event(ev, more); err != nil {
				return after, err
			}
			continue
		case err == io.EOF:
			return after, s.endFromMemory(ctx, e, after, ended, out)
		case errors.Is(err, eventlog.ErrExhausted):
			return after, errSlow
		case ctx.Err() != nil:
			return after, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			if err := out.heartbeat(); err != nil {
				return after, err
			}
			continue
		}
		return after, err
	}
}

// endFromMemory ends a stream whose feed closed: the job has ended. The
// end follows the pair's terminal, always: a feed that closed without
// one (it stopped following) leaves the rest to the store.
func (s *Server) endFromMemory(ctx context.Context, e *entry, last uint64, terminal bool, out sink) error {
	if e.feed.broken.Load() || !terminal {
		return s.fromStore(ctx, e.id, last, out, true)
	}
	select {
	case <-e.ended:
	case <-ctx.Done():
		return ctx.Err()
	}
	return out.end(e.final.State.String(), last)
}

// replay writes the recorded events after the cursor and returns the last
// one written (after itself when none).
func (s *Server) replay(ctx context.Context, pairID string, after uint64, out sink) (uint64, error) {
	rec, err := s.cfg.Store.Pair(ctx, pairID)
	if errors.Is(err, store.ErrNotFound) {
		return after, nil
	}
	if err != nil {
		return after, err
	}
	for i, en := range rec.Events {
		if en.Event.Seq() != after+1 {
			continue
		}
		if err := out.event(en.Event, i+1 < len(rec.Events)); err != nil {
			return after, err
		}
		after++
	}
	return after, nil
}

// fromStore streams a pair this server does not follow: what the store
// recorded after the cursor and, while the pair has no terminal there and
// is running (another process plays it), what the store records next,
// read every StorePoll; then its end. A store that reads a pair by parts
// (PairReaders) is read for what is new only.
func (s *Server) fromStore(ctx context.Context, pairID string, after uint64, out sink, end bool) error {
	read := func(ctx context.Context) (store.PairRecord, error) { return s.cfg.Store.Pair(ctx, pairID) }
	if pr, ok := s.cfg.Store.(PairReaders); ok {
		read = pr.PairReader(pairID)
	}
	rec, err := s.awaitRecord(ctx, read, out)
	if err != nil {
		return err
	}
	var last uint64
	if n := len(rec.Events); n > 0 {
		last = rec.Events[n-1].Event.Seq()
	}
	if after > last {
		return out.outOfRange(after, last)
	}
	var tick *time.Ticker
	idle := time.Duration(0)
	for {
		wrote := false
		for i, en := range rec.Events {
			if en.Event.Seq() != after+1 {
				continue
			}
			if err := out.event(en.Event, i+1 < len(rec.Events)); err != nil {
				return err
			}
			after, wrote = after+1, true
		}
		if ended(rec) {
			if !end {
				return nil
			}
			return out.end(string(rec.Summary.Status), after)
		}
		if tick == nil {
			tick = time.NewTicker(s.cfg.StorePoll)
			defer tick.Stop()
		}
		if idle += s.cfg.StorePoll; wrote {
			idle = 0
		} else if s.cfg.Heartbeat > 0 && idle >= s.cfg.Heartbeat {
			idle = 0
			if err := out.heartbeat(); err != nil {
				return err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if rec, err = s.awaitRecord(ctx, read, out); err != nil {
			return err
		}
	}
}

// awaitRecord reads the pair's record, waiting out a backend whose
// connection is down: the stream stays open (heartbeats go on) and goes
// on after its cursor once the connection is back.
func (s *Server) awaitRecord(ctx context.Context, read func(context.Context) (store.PairRecord, error), out sink) (store.PairRecord, error) {
	rec, err := read(ctx)
	if !errors.Is(err, job.ErrUnavailable) {
		return rec, err
	}
	tick := time.NewTicker(s.cfg.StorePoll)
	defer tick.Stop()
	idle := time.Duration(0)
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return rec, ctx.Err()
		}
		if idle += s.cfg.StorePoll; s.cfg.Heartbeat > 0 && idle >= s.cfg.Heartbeat {
			idle = 0
			if err := out.heartbeat(); err != nil {
				return rec, err
			}
		}
		if rec, err = read(ctx); !errors.Is(err, job.ErrUnavailable) {
			return rec, err
		}
	}
}

// statusQueued is the status a History gives a pair that a queue holds
// and no worker has started.
const statusQueued store.Status = "queued"

// ended reports whether the store holds the pair's end: its terminal, or
// a state other than queued or running (interrupted: its process is gone).
func ended(rec store.PairRecord) bool {
	if st := rec.Summary.Status; st != store.StatusRunning && st != statusQueued {
		return true
	}
	n := len(rec.Events)
	return n > 0 && orchestrator.Terminal(rec.Events[n-1].Event.Kind())
}

// writer bounds every write to a client by the write timeout: a client
// that does not take its bytes is disconnected, never waited for.
type writer struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	deadline time.Time // the deadline set last
	buf      []byte
}

func newWriter(w http.ResponseWriter, timeout time.Duration) *writer {
	return &writer{w: w, rc: http.NewResponseController(w), timeout: timeout, buf: make([]byte, 0, 4096)}
}

// write sends buf, flushing unless more follows.
func (wr *writer) write(more bool) error {
	now := time.Now()
	if wr.deadline.Sub(now) < wr.timeout/2 {
		wr.deadline = now.Add(wr.timeout)
		_ = wr.rc.SetWriteDeadline(wr.deadline) // unsupported: the server's own timeouts apply
	}
	if _, err := wr.w.Write(wr.buf); err != nil {
		return err
	}
	wr.buf = wr.buf[:0]
	if more {
		return nil
	}
	return wr.rc.Flush()
}

// clearDeadline lifts the write deadline, so that the next request on a
// kept-alive connection is not cut by this stream's.
func (wr *writer) clearDeadline() {
	if !wr.deadline.IsZero() {
		_ = wr.rc.SetWriteDeadline(time.Time{})
	}
}
