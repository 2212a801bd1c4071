package engine

import (
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

// Clock tells the time of events. It is injected so replays are exact (K30).
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// Limits bound what one run may hold. The zero value of a field means its
// default.
type Limits struct {
	// MaxTurns caps every definition's maximum turns. Default 64.
	MaxTurns int
	// MaxEvents and MaxBytes bound each run's event log (K18).
	// Defaults 4096 events and 8 MiB.
	MaxEvents int
	MaxBytes  int
	// MaxLag is how far a subscriber may fall behind before it is
	// disconnected (K19). Default: MaxEvents.
	MaxLag int
	// Mailbox is each best-effort observer's mailbox size. Default 64.
	Mailbox int
}

// Defaults for Limits and Config.
const (
	DefaultMaxTurns        = 64
	DefaultMaxEvents       = 4096
	DefaultMaxBytes        = 8 << 20
	DefaultFinalizeTimeout = 5 * time.Second
	// MaxFinalizeTimeout bounds how long finalization may take at most.
	MaxFinalizeTimeout = 5 * time.Minute
)

// Config holds every part the engine uses. There is no registry: what the
// engine needs is a field here (K21).
type Config struct {
	Provider model.Provider     // required
	Plans    plan.Source        // required
	IDs      id.Source          // required
	Clock    Clock              // required
	Broker   interaction.Broker // optional: without it every question fails
	// Required observers are told in order after each local commit and
	// may block (K17), each call within a bound between half and all of
	// FinalizeTimeout.
	Required []eventlog.Observer
	// BestEffort observers are told after the required ones accepted,
	// through bounded mailboxes; they never block a run.
	BestEffort []eventlog.Observer
	Limits     Limits
	// FinalizeTimeout bounds terminal events, lease release and other
	// finalization work, none of which the caller's cancellation can cut
	// (K26). Default DefaultFinalizeTimeout.
	FinalizeTimeout time.Duration
}

func (c *Config) normalize() error {
	switch {
	case c.Provider == nil:
		return bound.Missing("engine.provider")
	case c.Plans == nil:
		return bound.Missing("engine.plans")
	case c.IDs == nil:
		return bound.Missing("engine.ids")
	case c.Clock == nil:
		return bound.Missing("engine.clock")
	}
	for _, o := range c.Required {
		if o == nil {
			return bound.Missing("engine.required[]")
		}
	}
	for _, o := range c.BestEffort {
		if o == nil {
			return bound.Missing("engine.best_effort[]")
		}
	}
	l := &c.Limits
	if l.MaxTurns < 0 || l.MaxEvents < 0 || l.MaxBytes < 0 || l.MaxLag < 0 || l.Mailbox < 0 {
		return bound.Malformedf("engine.limits", "limits must not be negative")
	}
	if l.MaxTurns == 0 {
		l.MaxTurns = DefaultMaxTurns
	}
	if l.MaxEvents == 0 {
		l.MaxEvents = DefaultMaxEvents
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEvents < 16 {
		return bound.Malformedf("engine.limits.max_events", "must be at least 16")
	}
	if l.MaxBytes < 64<<10 {
		return bound.Malformedf("engine.limits.max_bytes", "must be at least 64 KiB")
	}
	if l.MaxLag == 0 {
		l.MaxLag = l.MaxEvents
	}
	if c.FinalizeTimeout < 0 || c.FinalizeTimeout > MaxFinalizeTimeout {
		return bound.Malformedf("engine.finalize_timeout", "must be between 0 and 5m")
	}
	if c.FinalizeTimeout == 0 {
		c.FinalizeTimeout = DefaultFinalizeTimeout
	}
	c.Required = append([]eventlog.Observer(nil), c.Required...)
	c.BestEffort = append([]eventlog.Observer(nil), c.BestEffort...)
	return nil
}

// logConfig is the event-log configuration of every run. Terminal events
// get a reserve big enough for the terminals of every lifecycle that can be
// open at once (interaction, tool or model operation, turn, run) plus the
// failure report of K16.
func (c *Config) logConfig() eventlog.Config {
	return eventlog.Config{
		MaxEvents:     c.Limits.MaxEvents,
		MaxBytes:      c.Limits.MaxBytes,
		ReserveEvents: 8,
		ReserveBytes:  32 << 10,
		MaxLag:        c.Limits.MaxLag,
		Required:      c.Required,
		BestEffort:    c.BestEffort,
		Mailbox:       c.Limits.Mailbox,
	}
}

// observed reports whether runs have observers, the only parts that can
// block an append.
func (c *Config) observed() bool { return len(c.Required)+len(c.BestEffort) > 0 }
