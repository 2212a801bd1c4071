package orchestrator

import (
	"context"
	"errors"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// Reason is why a pair ended (O5). Every pair ends with exactly one.
type Reason uint8

const (
	// ReasonCompleted: a Relay ran both workers.
	ReasonCompleted Reason = iota + 1
	// ReasonApproved: the second worker of a ReviewLoop approved.
	ReasonApproved
	// ReasonMaxRounds: a ReviewLoop reached Config.MaxRounds unapproved.
	ReasonMaxRounds
	// ReasonBudgetExhausted: a Budget limit was reached; Result.Limit
	// says which.
	ReasonBudgetExhausted
	// ReasonLoopDetected: a handoff had the same content (SHA-256) as an
	// earlier one of the pair.
	ReasonLoopDetected
	// ReasonWorkerFailed: a worker's run failed.
	ReasonWorkerFailed
	// ReasonHandoffRejected: the handoff policy refused a final answer
	// (over the bound with handoff.Reject).
	ReasonHandoffRejected
	// ReasonCancelled: Pair.Cancel or the pair's context (O6).
	ReasonCancelled
	// ReasonInfrastructure: the pair's own machinery failed: a required
	// timeline observer refused an event, the lease release failed, or a
	// panic was contained.
	ReasonInfrastructure
)

var reasonNames = [...]string{
	ReasonCompleted:       "completed",
	ReasonApproved:        "approved",
	ReasonMaxRounds:       "max_rounds",
	ReasonBudgetExhausted: "budget_exhausted",
	ReasonLoopDetected:    "loop_detected",
	ReasonWorkerFailed:    "worker_failed",
	ReasonHandoffRejected: "handoff_rejected",
	ReasonCancelled:       "cancelled",
	ReasonInfrastructure:  "infrastructure_failed",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Succeeded reports whether r ends a pair with pair.completed.
func (r Reason) Succeeded() bool { return r == ReasonCompleted || r == ReasonApproved }

// Limit names the budget a pair exhausted.
type Limit uint8

const (
	LimitTokens Limit = iota + 1
	LimitToolCalls
	LimitWallTime
)

func (l Limit) String() string {
	switch l {
	case LimitTokens:
		return "tokens"
	case LimitToolCalls:
		return "tool_calls"
	case LimitWallTime:
		return "wall_time"
	}
	return "limit(" + strconv.Itoa(int(l)) + ")"
}

// Result is what Wait returns once a pair has ended.
type Result struct {
	Reason Reason
	Limit  Limit // for ReasonBudgetExhausted
	Rounds int   // rounds started
	Runs   int   // worker runs started
	// Usage and ToolCalls are summed over every run of both workers.
	Usage     model.Usage
	ToolCalls int64
	// Final is what the pattern produced: the second worker's answer for
	// a Relay, the first worker's last answer for a ReviewLoop (the
	// approved one when Reason is ReasonApproved).
	Final message.Message
	// Review is a ReviewLoop's last review: the second worker's last
	// answer.
	Review message.Message
	// FinalAnswer names the worker whose final answer at the limit
	// (Config.OnLimit) is Final; empty when Final came from the pattern.
	FinalAnswer string
	// LastSeq is the timeline's last sequence: the pair terminal.
	LastSeq uint64
}

// Sentinels that *Error values match with errors.Is, one per failing
// Reason.
var (
	ErrMaxRounds       = errors.New("orchestrator: max rounds reached")
	ErrBudgetExhausted = errors.New("orchestrator: budget exhausted")
	ErrLoopDetected    = errors.New("orchestrator: loop detected")
	ErrWorkerFailed    = errors.New("orchestrator: worker failed")
	ErrHandoffRejected = errors.New("orchestrator: handoff rejected")
	ErrInfrastructure  = errors.New("orchestrator: pair infrastructure failed")
	// ErrCancelled is returned by Wait for a cancelled pair. It matches
	// context.Canceled too.
	ErrCancelled = cancelledError{}
	// errPanic is the cause of a contained panic; the value is dropped.
	errPanic = errors.New("panic contained")
)

type cancelledError struct{}

func (cancelledError) Error() string { return "orchestrator: pair cancelled" }

func (cancelledError) Is(target error) bool { return target == context.Canceled }

// Error is the typed failure of a pair. It matches the sentinel of its
// Reason with errors.Is; Err is the cause (an *engine.Failure, a
// *bound.Error from the handoff policy, an *eventlog.ObserverError, a
// *plan.ReleaseError, ...).
type Error struct {
	Reason Reason
	Limit  Limit  // for ReasonBudgetExhausted
	Worker string // the worker whose run failed or whose answer was refused
	RunID  id.Run // that run
	Err    error
}

// Error never includes the cause's text: it may hold anything.
func (e *Error) Error() string {
	s := "orchestrator: pair ended: " + e.Reason.String()
	if e.Reason == ReasonBudgetExhausted {
		s += " (" + e.Limit.String() + ")"
	}
	if e.Worker != "" {
		s += " (worker " + e.Worker + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e.Reason.
func (e *Error) Is(target error) bool {
	switch e.Reason {
	case ReasonMaxRounds:
		return target == ErrMaxRounds
	case ReasonBudgetExhausted:
		return target == ErrBudgetExhausted
	case ReasonLoopDetected:
		return target == ErrLoopDetected
	case ReasonWorkerFailed:
		return target == ErrWorkerFailed
	case ReasonHandoffRejected:
		return target == ErrHandoffRejected
	case ReasonInfrastructure:
		return target == ErrInfrastructure
	}
	return false
}

// DurabilityError says the pair terminal was committed to the timeline but
// a required timeline observer did not accept it within the finalization
// bound. Outcome is what Wait would otherwise have returned.
type DurabilityError struct {
	Seq     uint64
	Outcome error
	Err     error
}

func (e *DurabilityError) Error() string {
	return "orchestrator: pair terminal " + strconv.FormatUint(e.Seq, 10) + " could not be made durable"
}

func (e *DurabilityError) Unwrap() error { return e.Err }
