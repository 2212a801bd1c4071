package enginetest

import (
	"context"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// ReadAll reads sub until the log it follows is closed and returns every
// event it delivered, or the first error.
func ReadAll(ctx context.Context, sub *eventlog.Subscription) ([]eventlog.Event, error) {
	var out []eventlog.Event
	for e, err := range sub.All(ctx) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Kinds returns the kinds of evs in order.
func Kinds(evs []eventlog.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind()
	}
	return out
}
