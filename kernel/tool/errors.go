package tool

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Outcome says what an infrastructure failure left behind.
type Outcome uint8

const (
	// Definitive: the call failed and the tool knows its effect did not
	// happen (or, for a read-only tool, there was none).
	Definitive Outcome = iota + 1
	// Uncertain: a mutating call may or may not have taken effect. It is
	// never retried automatically and blocks snapshot export.
	Uncertain
)

func (o Outcome) String() string {
	switch o {
	case Definitive:
		return "definitive"
	case Uncertain:
		return "uncertain"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Retry is a tool's advice on whether the same call may be run again.
// The zero value is NoRetry, so forgetting to set it is always safe.
//
// RetryAllowed is safe only when (K7):
//   - the outcome is Definitive: an uncertain mutation never retries
//     (enforced by NewExecutionError), and
//   - the tool's definition is replay Safe or Idempotent: running an Unsafe
//     tool again is a new mutation that the model or a person must decide
//     on, never an automatic retry (enforced by the dispatcher, the only
//     place that knows the definition; it rejects the outcome as an
//     UnsafeRetry protocol violation).
type Retry uint8

const (
	NoRetry Retry = iota
	RetryAllowed
)

func (r Retry) String() string {
	switch r {
	case NoRetry:
		return "no_retry"
	case RetryAllowed:
		return "retry_allowed"
	}
	return "retry(" + strconv.Itoa(int(r)) + ")"
}

// MaxRetryAfter bounds the delay a tool may ask for before a retry.
const MaxRetryAfter = 10 * time.Minute

// ErrPanic is the cause of the execution error a dispatcher returns when a
// tool or guard panics. The panic value is dropped: it may hold secrets.
var ErrPanic = errors.New("tool: panic contained")

// ExecutionErrorConfig is the input to NewExecutionError.
type ExecutionErrorConfig struct {
	CallID     id.Call
	Outcome    Outcome
	Retry      Retry
	RetryAfter time.Duration // only with RetryAllowed; 0 means "no delay advised"
	Problem    problem.Problem
	// Cause is optional and reachable through Unwrap, so errors.Is keeps
	// working for context.Canceled and context.DeadlineExceeded (K8). Its
	// text is never printed by Error: it may hold secrets.
	Cause error
}

// ExecutionError is an immutable, call-correlated infrastructure failure
// (K7). A tool returns exactly one, directly (not wrapped or joined), with a
// zero Result. A model-visible problem is a Result, not an ExecutionError.
type ExecutionError struct {
	callID     id.Call
	outcome    Outcome
	retry      Retry
	retryAfter time.Duration
	problem    problem.Problem
	cause      error
}

// NewExecutionError validates cfg and returns an ExecutionError. Uncertain
// outcomes must carry NoRetry; a delay requires RetryAllowed.
func NewExecutionError(cfg ExecutionErrorConfig) (*ExecutionError, error) {
	if err := id.Check("execution_error.call_id", string(cfg.CallID)); err != nil {
		return nil, err
	}
	switch cfg.Outcome {
	case Definitive, Uncertain:
	case 0:
		return nil, bound.Missing("execution_error.outcome")
	default:
		return nil, bound.Malformedf("execution_error.outcome", "unknown outcome")
	}
	switch cfg.Retry {
	case NoRetry, RetryAllowed:
	default:
		return nil, bound.Malformedf("execution_error.retry", "unknown retry advice")
	}
	if cfg.Outcome == Uncertain && cfg.Retry != NoRetry {
		return nil, bound.Conflicting("execution_error.retry", "an uncertain outcome never retries")
	}
	if cfg.RetryAfter < 0 {
		return nil, bound.Malformedf("execution_error.retry_after", "must not be negative")
	}
	if cfg.RetryAfter > MaxRetryAfter {
		return nil, &bound.Error{Field: "execution_error.retry_after", Rule: bound.TooLarge,
			Limit: int(MaxRetryAfter / time.Second), Got: int(cfg.RetryAfter / time.Second), Detail: "seconds"}
	}
	if cfg.RetryAfter > 0 && cfg.Retry != RetryAllowed {
		return nil, bound.Conflicting("execution_error.retry_after", "a delay needs retry advice RetryAllowed")
	}
	if cfg.Problem.IsZero() {
		return nil, bound.Missing("execution_error.problem")
	}
	return &ExecutionError{
		callID:     cfg.CallID,
		outcome:    cfg.Outcome,
		retry:      cfg.Retry,
		retryAfter: cfg.RetryAfter,
		problem:    cfg.Problem,
		cause:      cfg.Cause,
	}, nil
}

// The helpers below return error, not *ExecutionError, so that a tool can
// write `return tool.Result{}, tool.Fail(call.ID(), p)`. On invalid input
// they return the validation error instead, which the dispatcher then
// rejects as a protocol violation: bad input never panics.

// Fail returns a definitive failure without retry advice.
func Fail(callID id.Call, p problem.Problem) error {
	return newOrErr(ExecutionErrorConfig{CallID: callID, Outcome: Definitive, Problem: p})
}

// Retryable returns a definitive failure that may be retried after delay.
// The dispatcher rejects it for a tool whose replay safety is Unsafe.
func Retryable(callID id.Call, p problem.Problem, after time.Duration) error {
	return newOrErr(ExecutionErrorConfig{CallID: callID, Outcome: Definitive, Retry: RetryAllowed, RetryAfter: after, Problem: p})
}

// FailUncertain returns an uncertain mutation outcome (never retried). cause
// may be nil.
func FailUncertain(callID id.Call, p problem.Problem, cause error) error {
	return newOrErr(ExecutionErrorConfig{CallID: callID, Outcome: Uncertain, Problem: p, Cause: cause})
}

var (
	problemCanceled = problem.Must("canceled", "the tool call was cancelled")
	problemDeadline = problem.Must("deadline_exceeded", "the tool call ran out of time")
)

// Canceled returns a definitive failure caused by ctxErr (usually
// ctx.Err()), so errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds. A nil ctxErr means
// context.Canceled. A mutating tool that was stopped mid-effect should
// return FailUncertain with the context error as cause instead.
func Canceled(callID id.Call, ctxErr error) error {
	if ctxErr == nil {
		ctxErr = context.Canceled
	}
	return newOrErr(ExecutionErrorConfig{CallID: callID, Outcome: Definitive, Problem: canceledProblem(ctxErr), Cause: ctxErr})
}

func canceledProblem(ctxErr error) problem.Problem {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return problemDeadline
	}
	return problemCanceled
}

func newOrErr(cfg ExecutionErrorConfig) error {
	e, err := NewExecutionError(cfg)
	if err != nil {
		return err
	}
	return e
}

// CallID returns the call this failure belongs to.
func (e *ExecutionError) CallID() id.Call { return e.callID }

// Outcome returns Definitive or Uncertain.
func (e *ExecutionError) Outcome() Outcome { return e.outcome }

// Retry returns the validated retry advice.
func (e *ExecutionError) Retry() Retry { return e.retry }

// RetryAfter returns the advised delay before a retry (0 if none).
func (e *ExecutionError) RetryAfter() time.Duration { return e.retryAfter }

// Problem returns the secret-free description of the failure.
func (e *ExecutionError) Problem() problem.Problem { return e.problem }

// Unwrap returns the cause, if any.
func (e *ExecutionError) Unwrap() error { return e.cause }

// Error prints the call ID, the outcome and the problem, never the cause.
func (e *ExecutionError) Error() string {
	return "tool call " + string(e.callID) + ": " + e.outcome.String() + " failure: " + e.problem.String()
}

// violation reports why e is not an acceptable outcome of a call to a tool
// defined by def, or 0 if it is acceptable.
func (e *ExecutionError) violation(def *Definition) Violation {
	if e == nil || e.problem.IsZero() || (e.outcome != Definitive && e.outcome != Uncertain) ||
		(e.retry != NoRetry && e.retry != RetryAllowed) {
		return InvalidError
	}
	if e.outcome == Uncertain && def.Effect() == ReadOnly {
		return ContradictoryOutcome
	}
	if e.retry == RetryAllowed && (e.outcome == Uncertain || def.Replay() == Unsafe) {
		return UnsafeRetry
	}
	return 0
}
