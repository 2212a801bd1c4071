package tool

import (
	"context"
	"errors"

	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Guard is a hook around dispatch (K10). Before may deny a call; After
// observes the outcome. Neither can change the outcome of a call that ran:
// the dispatcher captures that outcome before any After hook runs and
// rebuilds what Dispatch returns from the capture and the Before decisions
// alone. After receives only immutable values and a detached copy of the
// failure, so there is nothing it could mutate.
//
// Guards are called synchronously on the dispatching goroutine; a panic in
// either method is contained. A guard that blocks, blocks the call.
type Guard interface {
	// Before decides whether call may run. Guards run in order; the first
	// denial wins and later guards' Before is not called.
	Before(ctx context.Context, def Definition, call Call) Decision
	// After observes the outcome of every call that reached the guards
	// (denied, cancelled before it started, or executed), in reverse guard
	// order. It may see calls its own Before never saw.
	After(ctx context.Context, def Definition, call Call, o Observation)
}

// Decision is a guard's typed verdict. The zero Decision is invalid: a
// guard that returns it fails the call closed ("guard_protocol_violation").
type Decision struct {
	verdict uint8 // 0 invalid, 1 allow, 2 deny
	problem problem.Problem
}

var problemDenied = problem.Must("call_denied", "a guard denied this tool call")

// Allow lets the call proceed.
func Allow() Decision { return Decision{verdict: 1} }

// Deny refuses the call with a model-visible problem. A zero p is replaced
// by the code "call_denied".
func Deny(p problem.Problem) Decision {
	if p.IsZero() {
		p = problemDenied
	}
	return Decision{verdict: 2, problem: p}
}

// Denied reports whether d denies the call, and with which problem.
func (d Decision) Denied() (problem.Problem, bool) { return d.problem, d.verdict == 2 }

// DecideFunc adapts a function to a Guard that only decides.
type DecideFunc func(ctx context.Context, def Definition, call Call) Decision

// Before calls f.
func (f DecideFunc) Before(ctx context.Context, def Definition, call Call) Decision {
	return f(ctx, def, call)
}

// After does nothing.
func (DecideFunc) After(context.Context, Definition, Call, Observation) {}

// ObserveFunc adapts a function to a Guard that only observes.
type ObserveFunc func(ctx context.Context, def Definition, call Call, o Observation)

// Before allows every call.
func (ObserveFunc) Before(context.Context, Definition, Call) Decision { return Allow() }

// After calls f.
func (f ObserveFunc) After(ctx context.Context, def Definition, call Call, o Observation) {
	f(ctx, def, call, o)
}

// Observation is what After hooks see of an outcome: a read-only copy.
type Observation struct {
	result         Result
	err            *ExecutionError // never handed out; Err returns a detached copy
	denied         bool
	reporterFailed bool
}

// Result returns the result, if the call produced one (a denied call
// produces a problem result).
func (o Observation) Result() (Result, bool) { return o.result, o.err == nil }

// Err returns a detached copy of the execution error, or nil. Its cause is
// reduced to what classification needs (context.Canceled,
// context.DeadlineExceeded, ErrPanic or a copy of the *ProtocolError): the
// tool's own cause may be mutable and may hold secrets.
func (o Observation) Err() *ExecutionError {
	if o.err == nil {
		return nil
	}
	c := *o.err
	c.cause = detachCause(o.err.cause)
	return &c
}

// Denied reports whether a guard denied the call before it ran.
func (o Observation) Denied() bool { return o.denied }

// ReporterFailed reports whether the progress reporter failed during the
// call (the returned error is then a *DispatchFailure).
func (o Observation) ReporterFailed() bool { return o.reporterFailed }

func detachCause(cause error) error {
	var pe *ProtocolError
	switch {
	case cause == nil:
		return nil
	case errors.As(cause, &pe):
		c := *pe
		return &c
	case errors.Is(cause, ErrPanic):
		return ErrPanic
	case errors.Is(cause, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(cause, context.Canceled):
		return context.Canceled
	}
	return nil
}

// settled is the authoritative outcome of one dispatch, captured as a value
// before any After hook runs. Dispatch returns settled.outcome(), built
// from this value alone (K10).
type settled struct {
	result   Result
	err      *ExecutionError
	reporter error // first reporter failure; kept only with err
	denied   bool
}

func (s settled) observation() Observation {
	return Observation{result: s.result, err: s.err, denied: s.denied, reporterFailed: s.reporter != nil}
}

// outcome rebuilds the return values of Dispatch.
func (s settled) outcome() (Result, error) {
	switch {
	case s.err == nil:
		return s.result, nil
	case s.reporter != nil:
		return Result{}, &DispatchFailure{execution: s.err, reporter: s.reporter}
	}
	return Result{}, s.err
}

// guards is an ordered list of Guards.
type guards []Guard

// dispatch runs the Before hooks, then run if every guard allowed, then
// the After hooks on the captured outcome, and returns the capture.
func (gs guards) dispatch(ctx context.Context, def Definition, call Call, run func() settled) (Result, error) {
	s, decided := gs.decide(ctx, def, call)
	if !decided {
		s = run()
	}
	obs := s.observation()
	for i := len(gs) - 1; i >= 0; i-- {
		observe(ctx, gs[i], def, call, obs)
	}
	return s.outcome()
}

// decide returns the settled outcome of a call the guards stopped, or
// false if every guard allowed it.
func (gs guards) decide(ctx context.Context, def Definition, call Call) (settled, bool) {
	for _, g := range gs {
		d, ok := before(ctx, g, def, call)
		switch {
		case !ok:
			return settled{err: internalError(call.ID(), Definitive, problemGuardPanic, ErrPanic)}, true
		case d.verdict == 1:
		case d.verdict == 2:
			return settled{result: Result{callID: call.ID(), problem: d.problem}, denied: true}, true
		default:
			return settled{err: protocolViolation(&def, call, InvalidDecision)}, true
		}
	}
	return settled{}, false
}

func before(ctx context.Context, g Guard, def Definition, call Call) (d Decision, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return g.Before(ctx, def, call), true
}

func observe(ctx context.Context, g Guard, def Definition, call Call, o Observation) {
	defer func() { _ = recover() }() // an observer's panic never touches the outcome
	g.After(ctx, def, call, o)
}
