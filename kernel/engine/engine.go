package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

// Input is what a run starts from.
type Input struct {
	// Message is the user message that starts the run.
	Message message.Message
	// Plan, when set, makes the run lease exactly this plan instead of
	// the source's current one (K12), so that several runs can share one
	// plan while newer plans are activated.
	Plan plan.ID
}

// ErrClosed is returned by Start and Resume after Close or Shutdown.
var ErrClosed = errors.New("engine: closed")

// Engine starts and tracks runs. It is safe for concurrent use; one engine
// serves any number of runs.
type Engine struct {
	cfg Config

	lastPlan    atomic.Pointer[planParts] // see planParts
	lastEvents  atomic.Int32              // events the last finished run retained (logCapacity)
	lastHistory atomic.Int32              // messages the last finished run's history held (historyCapacity)

	mu     sync.Mutex
	closed bool
	// The active runs: the first one in solo, any others in active, which
	// is made only once two runs are active at the same time. An engine
	// that runs one run at a time then never builds a map.
	solo   *Run
	active map[id.Run]*Run
	// closing holds runs that have ended but whose logs are still
	// closing, once a new run took their ID (a resumed snapshot): Close
	// still waits for them.
	closing []*Run
	idle    chan struct{} // made by Close; closed when no run is active
}

// New validates cfg and returns an engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg}, nil
}

// Start validates the definition and input, leases the current plan (K13),
// and only then allocates IDs and starts the run. The run lives under ctx:
// cancelling ctx, or calling Run.Cancel, cancels it (K24).
//
// Errors before the lease leave no trace; after it, every outcome is
// reported by the run's events and Wait.
func (e *Engine) Start(ctx context.Context, def Definition, input Input) (*Run, error) {
	r, err := e.prepare(ctx, def, input)
	if err != nil {
		return nil, err
	}
	go r.loop(true)
	return r, nil
}

// Run is Start followed by the run's loop on the calling goroutine: when it
// returns without an error the run has ended, and its Wait returns at once.
// It saves the goroutine switch of Start for callers that would wait
// anyway; events, observers, cancellation and finalization are the same.
func (e *Engine) Run(ctx context.Context, def Definition, input Input) (*Run, error) {
	r, err := e.prepare(ctx, def, input)
	if err != nil {
		return nil, err
	}
	r.loop(true)
	return r, nil
}

func (e *Engine) prepare(ctx context.Context, def Definition, input Input) (*Run, error) {
	if err := e.checkStart(def, input.Message); err != nil {
		return nil, err
	}
	lease, err := leasePlan(ctx, func(ctx context.Context) (*plan.Lease, error) {
		if input.Plan != "" {
			return e.cfg.Plans.LeaseExact(ctx, input.Plan)
		}
		return e.cfg.Plans.Lease(ctx)
	})
	if err != nil {
		return nil, err
	}
	history := make([]message.Message, 1, e.historyCapacity())
	history[0] = input.Message
	return e.newRun(ctx, "", def, lease, state{history: history})
}

func (e *Engine) checkStart(def Definition, input message.Message) error {
	if def.IsZero() {
		return bound.Missing("definition")
	}
	if def.maxTurns > e.cfg.Limits.MaxTurns {
		return bound.Count("definition.max_turns", def.maxTurns, e.cfg.Limits.MaxTurns)
	}
	if input.IsZero() {
		return bound.Missing("input")
	}
	if input.Role() != message.RoleUser {
		return bound.Malformedf("input.role", "the input must be a user message")
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// leasePlan calls the plan source with its panics contained (K25).
func leasePlan(ctx context.Context, lease func(context.Context) (*plan.Lease, error)) (l *plan.Lease, err error) {
	defer func() {
		if v := recover(); v != nil {
			l, err = nil, &Failure{Problem: problemPanic("plan_source"), Cause: errPanic}
		}
	}()
	l, err = lease(ctx)
	if err == nil && l == nil {
		err = errors.New("engine: plan source returned no lease")
	}
	return l, err
}

// ErrRunActive is returned by Resume for a snapshot whose run is already
// active on this engine: two runs may not share one ID and sequence.
var ErrRunActive = errors.New("engine: a run with this ID is active")

// register adds r to the active set, or refuses it after Close or when a
// run with its ID has not ended. A run with its ID that has ended (its Wait
// has returned) while its log is still closing moves to e.closing.
func (e *Engine) register(r *Run) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if old := e.lookupLocked(r.id); old != nil {
		if !old.ended() {
			return ErrRunActive
		}
		e.removeLocked(old)
		e.closing = append(e.closing, old)
	}
	switch {
	case e.solo == nil:
		e.solo = r
	case e.active == nil:
		e.active = map[id.Run]*Run{r.id: r}
	default:
		e.active[r.id] = r
	}
	return nil
}

// lookupLocked returns the registered run with ID runID, if any.
func (e *Engine) lookupLocked(runID id.Run) *Run {
	if e.solo != nil && e.solo.id == runID {
		return e.solo
	}
	return e.active[runID]
}

// removeLocked takes r out of the active set, wherever it is.
func (e *Engine) removeLocked(r *Run) {
	switch {
	case e.solo == r:
		e.solo = nil
	case e.active[r.id] == r:
		delete(e.active, r.id)
	default:
		if i := slices.Index(e.closing, r); i >= 0 {
			e.closing = slices.Delete(e.closing, i, i+1)
		}
	}
}

// activeRunsLocked returns how many runs are active.
func (e *Engine) activeRunsLocked() int {
	n := len(e.active) + len(e.closing)
	if e.solo != nil {
		n++
	}
	return n
}

func (e *Engine) unregister(r *Run) {
	e.mu.Lock()
	e.removeLocked(r)
	if e.activeRunsLocked() == 0 && e.idle != nil {
		close(e.idle)
		e.idle = nil
	}
	e.mu.Unlock()
}

// Close refuses new runs and waits until every active run has ended or ctx
// is done (K27): it drains, and cancels nothing. This is the reverse of
// net/http, where Server.Close is the abrupt one and Server.Shutdown the
// graceful one.
func (e *Engine) Close(ctx context.Context) error { return e.drain(ctx, false) }

// Shutdown refuses new runs, asks every active run to cancel, and waits
// until they have ended or ctx is done (K27). Unlike net/http's
// Server.Shutdown, it does not wait for runs to finish their work: it
// cancels them.
func (e *Engine) Shutdown(ctx context.Context) error { return e.drain(ctx, true) }

func (e *Engine) drain(ctx context.Context, cancel bool) error {
	e.mu.Lock()
	e.closed = true
	if e.activeRunsLocked() == 0 {
		e.mu.Unlock()
		return nil
	}
	if e.idle == nil {
		e.idle = make(chan struct{})
	}
	idle := e.idle
	var runs []*Run
	if cancel {
		if e.solo != nil {
			runs = append(runs, e.solo)
		}
		for _, r := range e.active {
			runs = append(runs, r)
		}
		runs = append(runs, e.closing...)
	}
	e.mu.Unlock()
	for _, r := range runs {
		r.Cancel()
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
