package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Status is where a run is in its life.
type Status uint8

const (
	Running Status = iota + 1
	Completed
	Failed
	Cancelled
	// Suspended: stopped at a turn boundary on request, without a run
	// terminal; its snapshot can be resumed.
	Suspended
)

var statusNames = [...]string{Running: "running", Completed: "completed", Failed: "failed", Cancelled: "cancelled", Suspended: "suspended"}

func (s Status) String() string {
	if int(s) < len(statusNames) && statusNames[s] != "" {
		return statusNames[s]
	}
	return "unknown"
}

// Result is what Wait returns once a run has ended.
type Result struct {
	Status  Status
	Final   message.Message // the final assistant message, if the run completed
	Turns   int             // completed turns
	Usage   model.Usage     // summed over every model operation
	Problem problem.Problem // why it failed, if it failed
	LastSeq uint64          // the run's last event sequence
}

// state is what the loop owns while the run is active and what a snapshot
// holds once it is not.
type state struct {
	history      []message.Message
	turns        int
	usage        model.Usage
	lastSeq      uint64
	interactions []id.Interaction // used interaction IDs, never reused
	uncertain    bool             // a mutating tool call ended uncertain
}

// Run is one active or finished run.
type Run struct {
	e     *Engine
	id    id.Run
	def   Definition
	lease *plan.Lease
	plan  plan.Plan
	log   *eventlog.Log
	// parts are the leased plan's tool definitions and fingerprint,
	// shared by the engine's runs on that plan; read only.
	parts *planParts

	// The run's contexts; doc.go says what each is for.
	rctx      runCtx          // the run's: the caller's plus Cancel, Shutdown and the run's end
	appendCtx context.Context // the caller's without its cancellation, for the run's events
	obs       *observerBound  // bounds required observers on ordinary events; nil without them

	suspend atomic.Bool
	// clockBroken records that the injected clock panicked; the loop's
	// next event then fails the run (K25).
	clockBroken atomic.Bool
	done        chan struct{} // closed when the run has ended

	// Owned by the loop goroutine until done is closed; read-only after.
	st state
	// Started lifecycles awaiting a terminal, innermost last: at most a
	// turn and one operation, since a turn runs its operations one at a
	// time.
	open     [2]lifecycle
	nopen    int
	openCall openTool   // the call of the open tool lifecycle, if any
	ixMu     sync.Mutex // guards st.interactions and the interactions in flight
	// How the run ended, once done is closed.
	status  Status
	final   message.Message
	problem problem.Problem
	err     error
}

// runCtx is a run's own context: it lives under the caller's context and
// is cancelled by Run.Cancel, Shutdown and the end of the run.
type runCtx struct {
	context.Context
	stop context.CancelCauseFunc
}

func newRunCtx(caller context.Context) runCtx {
	ctx, stop := context.WithCancelCause(caller)
	return runCtx{Context: ctx, stop: stop}
}

// cancel ends the context. A caller's end that came first keeps its own
// error and cause.
func (c *runCtx) cancel() { c.stop(nil) }

// appendContext returns the context a run's events are written with: the
// caller's values without its cancellation. Only observers read it: without
// them the log ignores an append's context, and a lease's release only
// needs one that is never cancelled. So the wrapper is made only for a run
// with observers; otherwise Background does the same at no cost.
func appendContext(caller context.Context, cfg *Config) context.Context {
	if !cfg.observed() {
		return context.Background()
	}
	return context.WithoutCancel(caller)
}

// ended reports whether the run has ended.
func (r *Run) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// result returns the Result of an ended run.
func (r *Run) result() Result {
	return Result{Status: r.status, Final: r.final, Turns: r.st.turns, Usage: r.st.usage,
		Problem: r.problem, LastSeq: r.st.lastSeq}
}

// ID returns the run ID.
func (r *Run) ID() id.Run { return r.id }

// Plan returns the identity of the plan the run leased.
func (r *Run) Plan() plan.Identity { return r.plan.Identity() }

// Definition returns the run's definition.
func (r *Run) Definition() Definition { return r.def }

// Cancel asks the run to stop. It returns at once; Wait reports the end.
func (r *Run) Cancel() { r.rctx.cancel() }

// Suspend asks the run to stop at its next turn boundary without a run
// terminal, so that its snapshot can be resumed later.
func (r *Run) Suspend() { r.suspend.Store(true) }

// Done is closed when the run has ended.
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait blocks until the run has ended or ctx is done. The error is nil for a
// completed run, ErrCancelled for a cancelled one, ErrSuspended for a
// suspended one, a *Failure for a failed one, and a *DurabilityError when the
// terminal event could not be made durable (K26).
func (r *Run) Wait(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		return r.result(), r.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Subscribe returns a cursor over the run's events after afterSeq (K19).
func (r *Run) Subscribe(ctx context.Context, afterSeq uint64) (*eventlog.Subscription, error) {
	return r.log.Subscribe(ctx, afterSeq)
}

// Stats returns the run log's health stats (K20).
func (r *Run) Stats() eventlog.Stats { return r.log.Stats() }

func (e *Engine) newRun(ctx context.Context, runID id.Run, def Definition, lease *plan.Lease, st state) (*Run, error) {
	r := &Run{e: e, def: def, lease: lease, plan: lease.Plan(), st: st, done: make(chan struct{})}
	fail := func(err error) (*Run, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.FinalizeTimeout)
		defer cancel()
		if rerr := lease.Release(fctx); rerr != nil {
			return nil, &Failure{Problem: problemRelease, Cause: rerr}
		}
		return nil, err
	}
	var err error
	if runID == "" {
		if runID, err = newID[id.Run](e, id.KindRun, "run_id"); err != nil {
			return fail(err)
		}
	}
	r.id = runID
	cfg := e.cfg.logConfig()
	cfg.Capacity = e.logCapacity()
	cfg.Name = string(runID)
	if st.lastSeq > 0 {
		cfg.After = st.lastSeq
	}
	if r.log, err = eventlog.New(cfg); err != nil {
		return fail(err)
	}
	// Complete before registered: Shutdown may cancel r the moment it is
	// in the active set.
	r.rctx = newRunCtx(ctx)
	r.appendCtx = appendContext(ctx, &e.cfg)
	if len(e.cfg.Required) > 0 {
		r.obs = &observerBound{d: e.cfg.FinalizeTimeout}
	}
	r.parts = e.planParts(r.plan)
	if err := e.register(r); err != nil {
		r.rctx.cancel()
		r.log.Close(ctx)
		return fail(err)
	}
	return r, nil
}

// newID asks the injected source for an ID, containing its panics and
// validating what it returns.
func newID[T ~string](e *Engine, k id.Kind, field string) (v T, err error) {
	defer func() {
		if recover() != nil {
			v, err = "", &Failure{Problem: problemPanic("ID source"), Cause: errPanic}
		}
	}()
	return id.Parse[T](field, e.cfg.IDs.New(k))
}

// planParts is what every run on one plan derives from it the same way:
// its definitions as a slice for requests (model.NewRequest copies them,
// and no run writes them) and its fingerprint in hex. The engine keeps
// them for the plan it saw last, so runs on that plan share them.
type planParts struct {
	plan        plan.Plan
	tools       []tool.Definition
	fingerprint string
}

func (e *Engine) planParts(p plan.Plan) *planParts {
	if c := e.lastPlan.Load(); c != nil && c.plan == p {
		return c
	}
	c := &planParts{plan: p, tools: definitions(p), fingerprint: p.Fingerprint().String()}
	e.lastPlan.Store(c)
	return c
}

// definitions returns p's definitions as a slice, nil for a plan without
// tools. Only a plan with tools pays for ranging over its iterator, whose
// state moves to the heap.
func definitions(p plan.Plan) []tool.Definition {
	n := p.Len()
	if n == 0 {
		return nil
	}
	return slices.AppendSeq(make([]tool.Definition, 0, n), p.Definitions())
}

// A run log's first room, in events: the engine's last run's count,
// within these bounds. The minimum fits a text run (seven events); the
// maximum keeps one long run from making every later run reserve as much.
const (
	minLogCapacity = 7
	maxLogCapacity = 256
)

// A history's first room, in messages: the engine's last run's count,
// within these bounds. The minimum fits a text run (the input and the
// answer); the maximum keeps one long run from making every later run
// reserve as much.
const (
	minHistoryCapacity = 2
	maxHistoryCapacity = 16
)

// historyCapacity is room for as many messages as the engine's last run
// held, so that runs like it never grow their history: a text run then
// reserves no room for a tool round it will not have.
func (e *Engine) historyCapacity() int {
	return max(int(e.lastHistory.Load()), minHistoryCapacity)
}

// logCapacity is room for as many events as the engine's last run wrote,
// so that runs like it never grow their log. It is only a hint
// (eventlog.Config.Capacity) and never changes what a log retains.
func (e *Engine) logCapacity() int {
	return max(int(e.lastEvents.Load()), minLogCapacity)
}
