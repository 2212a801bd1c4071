package engine

import (
	"context"
	"errors"
	"sync"
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

// lifecycle is an open started event awaiting its terminal. The call of
// an open tool operation is in Run.openCall: tool calls run one at a time,
// so at most one tool lifecycle is ever open.
type lifecycle struct {
	turn     id.Turn
	op       id.Operation
	index    int // a turn's
	kind     lifeKind
	observed bool // a model stream produced an item
}

// openTool is what closing needs of the open tool operation: its call's
// ID and name, and its tool's effect.
type openTool struct {
	callID id.Call
	name   string
	effect tool.Effect
}

// observerBound bounds required observers on a run's ordinary events.
// One context.WithDeadline serves many events and is renewed once less than
// half of it is left, so every observer call gets between half and all of
// the bound. A context it replaced is not cancelled at once: an observer on
// a tool's goroutine may still be using it. By the renewal after next its
// deadline has passed, and it is cancelled then; release cancels the rest.
type observerBound struct {
	d time.Duration // FinalizeTimeout

	mu       sync.Mutex
	ctx      context.Context
	deadline time.Time
	stop     context.CancelFunc // ctx's
	prevStop context.CancelFunc // the context ctx replaced
}

// get returns the current bound on base, renewed if it is half spent.
func (b *observerBound) get(base context.Context) context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.ctx == nil || b.deadline.Sub(now) < b.d/2 {
		if b.prevStop != nil {
			b.prevStop() // its deadline has passed already
		}
		b.prevStop = b.stop
		b.deadline = now.Add(b.d)
		// Just inside the bound: Err reports a deadline only once the
		// context's timer has run, so an observer polling Err at the
		// bound itself would otherwise still find the context live.
		b.ctx, b.stop = context.WithDeadline(base, b.deadline.Add(-time.Nanosecond))
	}
	return b.ctx
}

// release cancels every bound handed out. The run calls it once its log
// has closed, when no observer can still be using one.
func (b *observerBound) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, stop := range [2]context.CancelFunc{b.prevStop, b.stop} {
		if stop != nil {
			stop()
		}
	}
}

// append commits one of the run's ordinary events. Appends never use the
// caller's cancellation: an event the run decided to write is written, or
// its failure reported (K16, K24). With required observers the wait for
// them is bounded.
func (r *Run) append(p event.Payload) (committed bool, err error) {
	ctx := r.appendCtx
	if r.obs != nil {
		ctx = r.obs.get(r.appendCtx)
	}
	return r.appendWith(ctx, p)
}

// appendWith commits one event under ctx.
func (r *Run) appendWith(ctx context.Context, p event.Payload) (committed bool, err error) {
	ev, err := r.log.Append(ctx, event.Record(r.now(), p))
	return !ev.IsZero(), err
}

// loopAppend is append for the loop's own events. Once the clock has
// panicked it reports the contained panic, so that the run fails at once
// while its terminals are still written, with the zero Unix time.
func (r *Run) loopAppend(p event.Payload) (committed bool, err error) {
	committed, err = r.append(p)
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
func emitFailed(err error) outcome {
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
	// Only observers can block finalization; the lease bounds its own
	// release. The bound covers all of finalization, from now.
	fctx, stop := r.appendCtx, context.CancelFunc(func() {})
	if r.e.cfg.observed() {
		fctx, stop = context.WithTimeout(r.appendCtx, r.e.cfg.FinalizeTimeout)
	}
	var finErr error
	for r.nopen > 0 {
		r.nopen--
		ev, uncertain := closing(r.open[r.nopen], r.openCall, out)
		if uncertain {
			r.st.uncertain = true
		}
		if _, err := r.appendWith(fctx, ev); err != nil && finErr == nil {
			finErr = err
		}
	}
	// fctx may already be spent on observers above, which must not make
	// a good release look failed.
	if err := r.lease.Release(r.appendCtx); err != nil {
		if out.status == Failed {
			out.cause = errors.Join(out.cause, err)
		} else {
			out = failed(problemRelease, err)
		}
	}
	var durable error
	if out.status != Suspended {
		if _, err := r.appendWith(fctx, r.terminal(out)); err != nil {
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
	// never hold up Wait (K17).
	close(r.done)
	_ = r.log.Close(fctx)
	// Released before unregistered: once Close or Shutdown returns, every
	// run it waited for has ended, its observers' goroutines are gone and
	// no context an observer was given for it is still open (K27).
	stop()
	if r.obs != nil {
		r.obs.release()
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

// closing returns the terminal event of an open lifecycle that the loop
// did not end itself: cancelled when the run was cancelled, failed
// otherwise. uncertain reports a mutating call whose effect is unknown: it
// may have run.
func closing(lc lifecycle, call openTool, out outcome) (ev event.Payload, uncertain bool) {
	cancelled := out.status == Cancelled
	p := out.problem
	if p.IsZero() {
		p = problemCancelled
	}
	switch lc.kind {
	case lifeTurn:
		if cancelled {
			return event.TurnCancelled{TurnID: lc.turn, Index: lc.index}, false
		}
		return event.TurnFailed{TurnID: lc.turn, Index: lc.index, Problem: p}, false
	case lifeModel:
		if cancelled {
			return event.ModelCancelled{OperationID: lc.op}, false
		}
		return event.ModelFailed{OperationID: lc.op, Problem: p, Observed: lc.observed}, false
	}
	o := tool.Definitive
	if call.effect == tool.Mutating {
		o, uncertain = tool.Uncertain, true
	}
	if cancelled {
		return event.ToolCancelled{OperationID: lc.op, CallID: call.callID, Name: call.name, Outcome: o.String()}, uncertain
	}
	return event.ToolFailed{OperationID: lc.op, CallID: call.callID, Name: call.name,
		Outcome: o.String(), Retry: tool.NoRetry.String(), Problem: p}, uncertain
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
