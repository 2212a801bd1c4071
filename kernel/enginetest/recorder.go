package enginetest

import (
	"context"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Recorder is an observer that keeps every event it is told about. Hook,
// when set, runs first for each event; its error is returned as the
// observer's.
type Recorder struct {
	Hook func(ctx context.Context, e eventlog.Event) error

	mu     sync.Mutex
	events []eventlog.Event
}

// Observe records e.
func (r *Recorder) Observe(ctx context.Context, e eventlog.Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.Hook != nil {
		return r.Hook(ctx, e)
	}
	return nil
}

// Events returns the recorded events.
func (r *Recorder) Events() []eventlog.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]eventlog.Event(nil), r.events...)
}

// Kinds returns the kinds of the recorded events in order.
func (r *Recorder) Kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Kinds(r.events)
}
