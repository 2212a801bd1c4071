package enginetest

import (
	"sync"
	"time"
)

// Clock is a deterministic clock: every Now is Step after the previous one,
// starting at Start (2026-01-01T00:00:00Z when zero).
type Clock struct {
	Start time.Time
	Step  time.Duration // default 1ms

	mu sync.Mutex
	n  int64
}

// Now returns the next instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	n := c.n
	c.n++
	c.mu.Unlock()
	start := c.Start
	if start.IsZero() {
		start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	step := c.Step
	if step == 0 {
		step = time.Millisecond
	}
	return start.Add(time.Duration(n) * step)
}
