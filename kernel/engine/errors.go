package engine

import (
	"context"
	"errors"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Problem codes the engine itself writes into failure events and results.
const (
	CodeMaxTurns        = "max_turns_exceeded"
	CodeProvider        = "provider_failed"
	CodeStream          = "stream_failed"
	CodeModelFailed     = "model_failed"
	CodeToolFailed      = "tool_failed"
	CodeObserverFailed  = "observer_failed"
	CodeReleaseFailed   = "lease_release_failed"
	CodePanic           = "panic"
	CodeInvalidRequest  = "invalid_request"
	CodeInvalidID       = "invalid_id"
	CodeLogExhausted    = "event_log_exhausted"
	CodeInteraction     = "interaction_failed"
	CodeCancelled       = "cancelled"
	CodeFinalizeTimeout = "finalize_timeout"
)

var (
	// ErrCancelled is returned by Wait for a cancelled run. It matches
	// context.Canceled too.
	ErrCancelled = cancelledError{}
	// ErrSuspended is returned by Wait for a run suspended at a turn
	// boundary; its snapshot can be resumed.
	ErrSuspended = errors.New("engine: run suspended")
	// errPanic is the cause of every contained panic. The panic value is
	// dropped: it may hold anything, secrets included.
	errPanic = errors.New("panic contained")
)

type cancelledError struct{}

func (cancelledError) Error() string { return "engine: run cancelled" }

func (cancelledError) Is(target error) bool {
	return target == context.Canceled
}

// Failure is the typed failure of a run: a secret-free problem plus the
// cause for errors.Is/As (a *tool.ExecutionError, *model.StreamError,
// *model.ProviderError, *plan.ReleaseError, *eventlog.ObserverError, ...).
type Failure struct {
	Problem problem.Problem
	Cause   error
}

func (f *Failure) Error() string { return "engine: " + f.Problem.String() }

func (f *Failure) Unwrap() error { return f.Cause }

// DurabilityError says the run's terminal event was committed locally but
// could not be made durable by a required observer within the finalization
// bound (K26). Outcome holds what the run would otherwise have returned.
type DurabilityError struct {
	Seq     uint64
	Outcome error // nil for a completed run
	Err     error // the observer failure or timeout
}

func (e *DurabilityError) Error() string {
	return "engine: terminal event " + strconv.FormatUint(e.Seq, 10) + " could not be made durable"
}

func (e *DurabilityError) Unwrap() error { return e.Err }

func problemPanic(where string) problem.Problem {
	return problem.Must(CodePanic, "a panic in the "+where+" was contained")
}

var errNoStream = errors.New("engine: provider returned no stream and no error")
