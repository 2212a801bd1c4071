package job

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"time"
)

// State is where a job is in its life: Queued, then Running, then exactly
// one of Completed, Failed or Cancelled. A job cancelled while queued goes
// straight from Queued to Cancelled. A redelivered job stays Running: its
// attempt grows, its state does not go back.
type State uint8

// The states of a job. Zero is no state: List(0) means every state.
const (
	Queued State = iota + 1
	Running
	Completed
	Failed
	Cancelled
)

var stateNames = [...]string{Queued: "queued", Running: "running", Completed: "completed", Failed: "failed", Cancelled: "cancelled"}

func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Terminal reports whether s is Completed, Failed or Cancelled.
func (s State) Terminal() bool { return s >= Completed && s <= Cancelled }

// ErrBadState is returned by UnmarshalText for a name that is no state.
var ErrBadState = errors.New("job: unknown state")

// MarshalText spells the state's name, so that it crosses a process
// boundary as text.
func (s State) MarshalText() ([]byte, error) {
	if s < Queued || s > Cancelled {
		return nil, ErrBadState
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n != "" && n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return ErrBadState
}

// Reasons a backend gives a job that failed without its pair saying why.
const (
	// ReasonInterrupted: the job was delivered again after its pair had
	// started, and the backend could not resume it; it is never re-run
	// from the start.
	ReasonInterrupted = "interrupted"
	// ReasonMaxDeliveries: the job was delivered as often as its backend
	// allows without a terminal report.
	ReasonMaxDeliveries = "max_deliveries"
	// ReasonCancelled: the job was cancelled before its pair started.
	ReasonCancelled = "cancelled"
)

// Job is a pair job as it travels to a worker.
type Job struct {
	// ID names the job; it is also the ID of the job's pair.
	ID string
	// Attempt counts deliveries: 1 for the first, more once a worker
	// that held the job stopped answering and it was delivered again.
	Attempt int
	// Spec is the pair spec a worker builds the pair from.
	Spec []byte
}

// Report is what a worker says about one attempt at a job: that it
// started, or how it ended. A backend keeps at most one terminal report
// per job, whatever it is told afterwards.
type Report struct {
	ID      string
	Attempt int
	State   State
	// Reason is the pair's termination reason, or one of the Reason
	// constants when the job ended without its pair saying why.
	Reason string
	// Error is the message of the job's error; empty when it completed.
	// It is produced from typed errors that never carry secrets.
	Error string
	At    time.Time
}

// Status is a snapshot of one job as any backend sees it.
type Status struct {
	ID      string
	Seq     uint64 // submission number within the backend, when it keeps one
	Attempt int
	State   State
	Reason  string
	Error   string
	// Started is zero for a job that never left the queue, Ended until
	// the job ends.
	Submitted, Started, Ended time.Time
}

// ErrNotFound names a job the backend does not know or no longer keeps.
var ErrNotFound = errors.New("job: no such job")

// Backend is what serve, the command line and hosts need of a job backend
// once a job is submitted. Submission stays with each backend, which
// takes what its workers can play: a pair config in process, a pair spec
// across processes. Errors about a job the backend does not know match
// ErrNotFound.
type Backend interface {
	// Status returns a snapshot of the job.
	Status(ctx context.Context, id string) (Status, error)
	// Statuses yields the jobs in state, every job for state 0, in
	// submission order, from one snapshot; or, once, why it could not
	// list them.
	Statuses(ctx context.Context, state State) iter.Seq2[Status, error]
	// Cancel cancels the job; a job that has ended is left as it is.
	Cancel(ctx context.Context, id string) error
	// Await blocks until the job has ended or ctx is done.
	Await(ctx context.Context, id string) (Status, error)
}
