package enginetest

import (
	"sync/atomic"
	"time"
)

// Clock is a deterministic clock: every Now is Step after the previous one,
// starting at Start (2026-01-01T00:00:00Z when zero). It is safe for
// concurrent use and takes no lock, so that it adds as little as possible
// to the benchmarks that use it.
type Clock struct {
	Start time.Time
	Step  time.Duration // default 1ms

	n atomic.Int64
}

// defaultStart is the zero Clock's first instant.
var defaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Now returns the next instant.
func (c *Clock) Now() time.Time {
	n := c.n.Add(1) - 1
	start := c.Start
	if start.IsZero() {
		start = defaultStart
	}
	step := c.Step
	if step == 0 {
		step = time.Millisecond
	}
	return start.Add(time.Duration(n) * step)
}
