package scheduler

import "context"

// NewWithJobContext is New, with f as the maker of every job's context in
// place of context.WithCancel. The hook belongs to this scheduler only, so
// tests that use it may run in parallel.
func NewWithJobContext(cfg Config, f func(context.Context) (context.Context, context.CancelFunc)) (*Scheduler, error) {
	return newScheduler(cfg, f)
}
