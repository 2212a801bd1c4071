package scheduler

import (
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// State is where a job is in its life: Queued, then Running, then exactly
// one of Completed, Failed or Cancelled. A job cancelled while queued goes
// straight from Queued to Cancelled.
type State uint8

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

// Info is a snapshot of one job.
type Info struct {
	ID    string
	Seq   uint64 // submission number: 1, 2, ... in the order Submit accepted jobs
	State State
	// Submitted, Started and Ended are read from Config.Clock. Started is
	// zero for a job that never left the queue; Ended is zero until the
	// job ends.
	Submitted, Started, Ended time.Time
	// Result is the pair's result once its pair has ended: termination
	// reason (Result.Reason), rounds, usage over both workers, final
	// answer. It is zero for a job that ended without a pair.
	Result orchestrator.Result
	// Err is nil for a Completed job. For a Failed or Cancelled one it is
	// what the pair's Wait returned (an *orchestrator.Error,
	// orchestrator.ErrCancelled, ...), ErrCancelled for a job cancelled
	// before its pair started, or the orchestrator's refusal of the job's
	// config (a *bound.Error, for example). A job is Completed only when
	// its pair succeeded without error: a pair whose terminal could not be
	// made durable (*orchestrator.DurabilityError) fails its job.
	Err error
}
