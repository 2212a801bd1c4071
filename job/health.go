package job

import (
	"errors"
	"time"
)

// ErrUnavailable is matched by the errors of a backend that cannot reach
// where its jobs live right now (its connection is down). Nothing was
// done; the same call may succeed later.
var ErrUnavailable = errors.New("job: backend unavailable")

// Health is a backend's link to where its jobs live, as it last saw it.
type Health struct {
	// Available is false while calls would fail with ErrUnavailable.
	Available bool
	// Name names what the backend reaches, for people: "NATS".
	Name string
	// State is "connected", "reconnecting" or "closed" (given up for
	// good).
	State string
	// Since is when State began.
	Since time.Time
}

// Monitor is implemented by a backend that can lose its link: the
// in-process scheduler never does and does not implement it.
type Monitor interface {
	// Health returns the backend's health now and a channel closed at
	// its next change.
	Health() (Health, <-chan struct{})
}
