package sidelog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// WriterConfig is the input to NewWriter.
type WriterConfig[H any] struct {
	// Name is the store log's name.
	Name string
	// What names the events in the error of those the bound dropped
	// ("MCP", "plugin").
	What string
	// Max bounds the events held and recorded.
	Max int
	// After is the last sequence the log already holds: a resumed pair
	// continues it.
	After uint64
	// Store records the log (the store, or what stands for it).
	Store eventlog.Observer
	// Encode makes a held event's record, at Flush.
	Encode func(H) (eventlog.Record, error)
}

// Writer holds a side log's events as they happen (Hold must return
// quickly: it runs on the goroutine of whatever reports them) and records
// them at flush points the caller chooses.
type Writer[H any] struct {
	what   string
	max    int
	encode func(H) (eventlog.Record, error)
	log    *eventlog.Log

	mu      sync.Mutex
	pending []H
	dropped int
}

// NewWriter starts the log cfg names.
func NewWriter[H any](cfg WriterConfig[H]) (*Writer[H], error) {
	l, err := eventlog.New(eventlog.Config{
		Name: cfg.Name, MaxEvents: cfg.Max + 1, MaxBytes: 4 << 20, After: cfg.After,
		Required: []eventlog.Observer{cfg.Store},
	})
	if err != nil {
		return nil, err
	}
	return &Writer[H]{what: cfg.What, max: cfg.Max, encode: cfg.Encode, log: l}, nil
}

// Hold keeps h for the next Flush, or counts it as dropped past the bound.
func (w *Writer[H]) Hold(h H) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) >= w.max {
		w.dropped++
		return
	}
	w.pending = append(w.pending, h)
}

// Drop counts an event that could not be held.
func (w *Writer[H]) Drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropped++
}

// Flush records what is held. Events that cannot be encoded or that the
// log refuses are joined in the returned error; the pair's own record is
// not affected.
func (w *Writer[H]) Flush(ctx context.Context) error {
	w.mu.Lock()
	pending := w.pending
	w.pending = nil
	w.mu.Unlock()
	var errs []error
	for _, h := range pending {
		rec, err := w.encode(h)
		if err == nil {
			_, err = w.log.Append(ctx, rec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close closes the log, and says how many events the bound dropped.
func (w *Writer[H]) Close(ctx context.Context) error {
	w.mu.Lock()
	dropped := w.dropped
	w.mu.Unlock()
	err := w.log.Close(ctx)
	if dropped > 0 {
		err = errors.Join(err, fmt.Errorf("%d %s events over the bound of %d were not recorded", dropped, w.what, w.max))
	}
	return err
}
