package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// entry is a pair this server submitted and still keeps in memory.
type entry struct {
	id        string
	jobID     string
	submitted time.Time
	feed      *feed
	ended     chan struct{} // closed once the job ended and the feed is closed
	// final is the job's last state, set before ended is closed: the
	// scheduler may forget the job before the server lets the entry go.
	final scheduler.Info
	size  int64 // what the feed holds once ended; guarded by Server.mu
	// cancelling is set by the first cancel request.
	cancelling atomic.Bool
}

// info returns the job's state: its final one once ended, else the
// scheduler's.
func (s *Server) info(e *entry) (scheduler.Info, error) {
	select {
	case <-e.ended:
		return e.final, nil
	default:
	}
	return s.cfg.Scheduler.Get(e.jobID)
}

// feed is a pair's durable stream: a required observer of the pair
// timeline, placed after the store, that copies each event it is told
// into a log of its own with the same sequence. Every event in it is
// therefore durable, and subscribers get the kernel log's gap-free,
// never-waiting cursors (K19) over it.
type feed struct {
	log *eventlog.Log
	// broken is set when an event arrived out of sequence (a required
	// observer before the feed refused one): the feed stops copying, and
	// streams are served from the store.
	broken atomic.Bool
	// ended is set once the feed is told a pair terminal: being after
	// the store, it is then in the store.
	ended atomic.Bool
}

func newFeed(pairID string, lag int) (*feed, error) {
	l, err := eventlog.New(eventlog.Config{
		MaxEvents: feedMaxEvents, MaxBytes: feedMaxBytes,
		ReserveEvents: 1, ReserveBytes: eventlog.MaxEventBytes,
		MaxLag: lag, Name: pairID, Capacity: 64,
	})
	if err != nil {
		return nil, err
	}
	return &feed{log: l}, nil
}

// Observe copies e. It never fails the pair: a feed that cannot follow
// marks itself broken instead.
func (f *feed) Observe(ctx context.Context, e eventlog.Event) error {
	if orchestrator.Terminal(e.Kind()) {
		f.ended.Store(true)
	}
	if f.broken.Load() {
		return nil
	}
	want := f.log.Stats().LastSeq + 1
	if e.Seq() != want {
		f.broken.Store(true)
		return nil
	}
	_, err := f.log.Append(context.WithoutCancel(ctx), eventlog.Record{
		Kind: e.Kind(), Time: e.Time(), Terminal: orchestrator.Terminal(e.Kind()), Payload: e.Payload()})
	if err != nil {
		f.broken.Store(true)
	}
	return nil
}

func (f *feed) close() { _ = f.log.Close(context.Background()) }
