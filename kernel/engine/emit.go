package engine

import (
	"context"
	"errors"
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// lifeKind names a lifecycle the loop has started and must end (K15).
type lifeKind uint8

const (
	lifeTurn lifeKind = iota + 1
	lifeModel
	lifeTool
)

// lifecycle is an open started event awaiting its terminal. It is kept
// small because the loop pushes and pops one per started event: the call
// and definition of an open tool operation are in Run.openCall, since tool
// calls run one at a time and at most one tool lifecycle is ever open.
type lifecycle struct {
	turn     id.Turn
	op       id.Operation
	index    int32 // a turn's; within the engine's turn limit
	kind     lifeKind
	observed bool // a model stream produced an item
}

// openTool is what closing needs of the open tool operation: its call's
// ID and name, and its tool's effect. It is kept this small because every
// run carries one.
type openTool struct {
	callID id.Call
	name   string
	effect tool.Effect
}

// append commits one event. Appends never use the caller's cancellation:
// an event the run decided to write is written, or its failure reported
// (K16, K24). With required observers the wait for them is bounded.
func (r *Run) append(ctx context.Context, p event.Payload) (committed bool, err error) {
	if len(r.e.cfg.Required) > 0 && ctx == r.appendCtx {
		ctx = r.observerCtx()
	}
	ev, err := r.log.Append(ctx, event.Record(r.now(), p))
	return !ev.IsZero(), err
}

// observerCtx bounds required observers on the run's ordinary events.
// One bound is shared and renewed once less than half of FinalizeTimeout
// is left, so every observer call gets between half and all of it. The
// bound starts when an observer first asks about it (lazyDeadline): one
// that never looks at its context costs no timer and no clock reading. An
// older context is never released early: it may still be in use by an
// observer on a tool's goroutine, and its own timer ends it.
func (r *Run) observerCtx() context.Context {
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	if r.obs == nil || r.obs.spent() {
		r.obs = newLazyDeadline(r.appendCtx, r.e.cfg.FinalizeTimeout)
	}
	return r.obs
}

// finalBound returns the bound of finalization, started now: the shared
// observer bound when no observer has asked about it yet (nobody holds a
// deadline of it that starting it now could shorten), else a new one, and
// then also the shared bound it replaced, for the caller to release once
// finalization is over.
func (r *Run) finalBound() (bound, last *lazyDeadline) {
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	if r.obs == nil || r.obs.armed.Load() {
		last = r.obs
		r.obs = newLazyDeadline(r.appendCtx, r.e.cfg.FinalizeTimeout)
	}
	r.obs.start()
	return r.obs, last
}

// loopAppend is append for the loop's own events. Once the clock has
// panicked it reports the contained panic, so that the run fails at once
// while its terminals are still written, with the zero Unix time.
func (r *Run) loopAppend(p event.Payload) (committed bool, err error) {
	committed, err = r.append(r.appendCtx, p)
	if err == nil && r.clockBroken.Load() {
		err = errClockPanic
	}
	return committed, err
}

var errClockPanic = errors.New("engine: clock panicked")

func (r *Run) emit(p event.Payload) error {
	_, err := r.loopAppend(p)
	return err
}

// start emits a started event and opens its lifecycle. A committed event
// opens the lifecycle even when an observer then fails, so that it still
// gets its terminal.
func (r *Run) start(lc lifecycle, p event.Payload) error {
	committed, err := r.loopAppend(p)
	if committed {
		r.open[r.nopen] = lc
		r.nopen++
	}
	return err
}

// end emits the terminal of the innermost open lifecycle.
func (r *Run) end(p event.Payload) error {
	committed, err := r.loopAppend(p)
	if committed {
		r.nopen--
	}
	return err
}

// emitFailed turns an append error into the run's failure. The committed
// sequence stays; the failure is reported by the later terminals (K16).
func (r *Run) emitFailed(err error) outcome {
	var oe *eventlog.ObserverError
	if errors.As(err, &oe) {
		return failed(problemObserver, err)
	}
	if err == errClockPanic {
		return failed(problemPanic("clock"), errPanic)
	}
	return failed(problemLog, err)
}

// now reads the injected clock, containing its panics: a broken clock must
// not stop terminals from being written, so it yields the zero Unix time
// and the loop fails the run (loopAppend).
func (r *Run) now() (t time.Time) {
	defer func() {
		if recover() != nil {
			r.clockBroken.Store(true)
			t = time.Unix(0, 0).UTC()
		}
	}()
	return r.e.cfg.Clock.Now()
}

// finalize closes every open lifecycle, releases the lease and writes the
// run's single terminal, all under a context that the caller's
// cancellation cannot cut and that is bounded by FinalizeTimeout (K26).
func (r *Run) finalize(out outcome) {
	fctx := r.appendCtx
	var bound, last *lazyDeadline
	if r.e.cfg.observed() {
		// Only observers can block finalization; the lease bounds its
		// own release. The bound covers all of finalization, from now,
		// and is released once the log has closed.
		bound, last = r.finalBound()
		fctx = bound
	}
	var finErr error
	for r.nopen > 0 {
		r.nopen--
		lc := r.open[r.nopen]
		if _, err := r.append(fctx, r.closing(lc, out)); err != nil && finErr == nil {
			finErr = err
		}
	}
	// The lease bounds its own release; fctx may already be spent on
	// observers above, which must not make a good release look failed.
	if err := r.lease.Release(r.appendCtx); err != nil {
		if out.status == Failed {
			out.cause = errors.Join(out.cause, err)
		} else {
			out = failed(problemRelease, err)
		}
	}
	var durable error
	if out.status != Suspended {
		if _, err := r.append(fctx, r.terminal(out)); err != nil {
			durable = err
		}
	}
	if durable == nil {
		durable = finErr
	}
	st := r.log.Stats()
	r.st.lastSeq = st.LastSeq
	r.e.lastEvents.Store(int32(min(st.RetainedEvents, maxLogCapacity)))
	r.e.lastHistory.Store(int32(min(len(r.st.history), maxHistoryCapacity)))
	r.status, r.final, r.problem = out.status, out.final, out.problem
	r.err = outcomeErr(out)
	if durable != nil {
		seq := r.st.lastSeq
		var oe *eventlog.ObserverError
		if errors.As(durable, &oe) {
			seq = oe.Seq
		}
		r.err = &DurabilityError{Seq: seq, Outcome: r.err, Err: durable}
	}
	r.rctx.cancel()
	// Ended before the log closes: best-effort observers still draining
	// never hold up Wait (K17). Closed before unregistered: once Close or
	// Shutdown returns, every run it waited for has ended and its
	// observers' goroutines are gone (K27).
	r.done.fire()
	_ = r.log.Close(fctx)
	// Released before unregistered: once Close or Shutdown returns, no
	// context an observer was given for this run is still open.
	if bound != nil {
		bound.release()
	}
	if last != nil {
		last.release()
	}
	r.e.unregister(r)
}

func outcomeErr(out outcome) error {
	switch out.status {
	case Completed:
		return nil
	case Cancelled:
		return ErrCancelled
	case Suspended:
		return ErrSuspended
	}
	return &Failure{Problem: out.problem, Cause: out.cause}
}

// closing returns the terminal event for an open lifecycle: cancelled when
// the run was cancelled, failed otherwise.
func (r *Run) closing(lc lifecycle, out outcome) event.Payload {
	cancelled := out.status == Cancelled
	p := out.problem
	if p.IsZero() {
		p = problemCancelled
	}
	switch lc.kind {
	case lifeTurn:
		if cancelled {
			return event.TurnCancelled{TurnID: lc.turn, Index: int(lc.index)}
		}
		return event.TurnFailed{TurnID: lc.turn, Index: int(lc.index), Problem: p}
	case lifeModel:
		if cancelled {
			return event.ModelCancelled{OperationID: lc.op}
		}
		return event.ModelFailed{OperationID: lc.op, Problem: p, Observed: lc.observed}
	default:
		// The call may have run: for a mutating tool its effect is unknown.
		tc := r.openCall
		o := tool.Definitive
		if tc.effect == tool.Mutating {
			o = tool.Uncertain
			r.st.uncertain = true
		}
		if cancelled {
			return event.ToolCancelled{OperationID: lc.op, CallID: tc.callID, Name: tc.name, Outcome: o.String()}
		}
		return event.ToolFailed{OperationID: lc.op, CallID: tc.callID, Name: tc.name,
			Outcome: o.String(), Retry: tool.NoRetry.String(), Problem: p}
	}
}

// terminal returns the run's single terminal event.
func (r *Run) terminal(out outcome) event.Payload {
	in, outTok := r.st.usage.Input(), r.st.usage.Output()
	switch out.status {
	case Completed:
		return event.RunCompleted{RunID: r.id, Turns: r.st.turns, InputTokens: in, OutputTokens: outTok, FinalText: out.final.Text()}
	case Cancelled:
		return event.RunCancelled{RunID: r.id, Turns: r.st.turns, InputTokens: in, OutputTokens: outTok}
	}
	return event.RunFailed{RunID: r.id, Problem: out.problem, Turns: r.st.turns, InputTokens: in, OutputTokens: outTok}
}
