package tool

import (
	"errors"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// ErrUnknownTool matches (errors.Is) the error Dispatch returns for a call
// whose name is not in the dispatcher's snapshot (K6). That error is also a
// *bound.Error for the field "tool_call.name". Nothing was executed.
var ErrUnknownTool = errors.New("tool: unknown tool")

func unknownTool() error {
	return errors.Join(ErrUnknownTool, bound.Malformedf("tool_call.name", "not in the dispatcher's snapshot"))
}

// DispatchFailure is returned when a call ended in an execution error and
// the progress reporter also failed (K9). Unwrap reaches only the execution
// error, so errors.Is and errors.As classify the failure by what the tool
// did, never by the reporter; ReporterFailure exposes the reporter's error
// for explicit inspection. Only the first reporter error is kept.
type DispatchFailure struct {
	execution *ExecutionError
	reporter  error
}

// Execution returns the authoritative execution error.
func (f *DispatchFailure) Execution() *ExecutionError { return f.execution }

// ReporterFailure returns the first error the progress reporter returned.
func (f *DispatchFailure) ReporterFailure() error { return f.reporter }

// Unwrap returns the execution error only.
func (f *DispatchFailure) Unwrap() error {
	if f.execution == nil { // only a hand-made zero value
		return nil
	}
	return f.execution
}

// Error prints the execution error and notes the reporter failure without
// quoting it.
func (f *DispatchFailure) Error() string {
	if f.execution == nil {
		return "tool: empty dispatch failure"
	}
	return f.execution.Error() + " (progress reporter also failed)"
}

// Violation names how a tool or guard broke the dispatch protocol.
type Violation uint8

const (
	// UntypedError: the error is not an *ExecutionError.
	UntypedError Violation = iota + 1
	// IndirectError: an *ExecutionError wrapped (fmt.Errorf %w) or joined
	// (errors.Join) instead of returned directly.
	IndirectError
	// ResultWithError: a non-zero Result together with an error.
	ResultWithError
	// EmptyOutcome: a zero Result and a nil error.
	EmptyOutcome
	// ForeignCall: the Result or ExecutionError names another call ID.
	ForeignCall
	// InvalidError: an *ExecutionError not built by NewExecutionError
	// (nil or zero value).
	InvalidError
	// UnsafeRetry: retry advice on an uncertain outcome, or on a tool whose
	// replay safety is Unsafe.
	UnsafeRetry
	// ContradictoryOutcome: an uncertain outcome from a read-only tool,
	// which has no mutation to be uncertain about.
	ContradictoryOutcome
	// InvalidDecision: a guard returned the zero Decision.
	InvalidDecision
)

var violationText = [...]string{
	UntypedError:         "returned an untyped error",
	IndirectError:        "returned a wrapped or joined execution error",
	ResultWithError:      "returned a result together with an error",
	EmptyOutcome:         "returned neither a result nor an error",
	ForeignCall:          "returned an outcome for another call",
	InvalidError:         "returned an execution error not built by NewExecutionError",
	UnsafeRetry:          "returned retry advice that is unsafe for its replay safety or outcome",
	ContradictoryOutcome: "returned an uncertain outcome although it is read-only",
	InvalidDecision:      "returned the zero decision",
}

func (v Violation) String() string {
	if int(v) < len(violationText) && violationText[v] != "" {
		return violationText[v]
	}
	return "violation(" + strconv.Itoa(int(v)) + ")"
}

// ProtocolError records that a tool (or a guard) broke the dispatch
// protocol (K7). The dispatcher never passes the offending outcome on: it
// returns an *ExecutionError with problem code "tool_protocol_violation"
// (or "guard_protocol_violation") whose cause is a *ProtocolError, so
// errors.As finds both. The rejected error itself is dropped: its text may
// hold secrets and its chain must not influence classification.
type ProtocolError struct {
	callID    id.Call
	tool      string
	violation Violation
}

// CallID returns the call whose outcome was rejected.
func (e *ProtocolError) CallID() id.Call { return e.callID }

// Tool returns the name of the tool that was called.
func (e *ProtocolError) Tool() string { return e.tool }

// Violation returns what was wrong.
func (e *ProtocolError) Violation() Violation { return e.violation }

func (e *ProtocolError) Error() string {
	return "tool " + e.tool + " call " + string(e.callID) + ": protocol violation: " + e.violation.String()
}

var (
	problemToolProtocol  = problem.Must("tool_protocol_violation", "the tool broke the dispatch protocol")
	problemGuardProtocol = problem.Must("guard_protocol_violation", "a guard broke the dispatch protocol")
	problemToolPanic     = problem.Must("tool_panic", "the tool panicked")
	problemGuardPanic    = problem.Must("guard_panic", "a guard panicked")
)

// outcomeOf is how certain a failure the dispatcher did not see coming
// (panic, protocol violation) can be: a mutating tool may have committed
// part of its effect, so only a read-only tool's failure is definitive.
func outcomeOf(def *Definition) Outcome {
	if def.Effect() == Mutating {
		return Uncertain
	}
	return Definitive
}

// internalError builds an execution error from constants known to be
// valid, so it cannot fail.
func internalError(callID id.Call, o Outcome, p problem.Problem, cause error) *ExecutionError {
	return &ExecutionError{callID: callID, outcome: o, retry: NoRetry, problem: p, cause: cause}
}

func protocolViolation(def *Definition, call Call, v Violation) *ExecutionError {
	p, o := problemToolProtocol, outcomeOf(def)
	if v == InvalidDecision {
		// A guard fails before the tool runs: nothing happened.
		p, o = problemGuardProtocol, Definitive
	}
	return internalError(call.ID(), o, p, &ProtocolError{callID: call.ID(), tool: call.Name(), violation: v})
}
