package scheduler

import (
	"time"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// State is where a job is in its life (package job): Queued, then Running,
// then exactly one of Completed, Failed or Cancelled. A job cancelled
// while queued goes straight from Queued to Cancelled.
type State = job.State

// The states of a job.
const (
	Queued    = job.Queued
	Running   = job.Running
	Completed = job.Completed
	Failed    = job.Failed
	Cancelled = job.Cancelled
)

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

// Status is the snapshot as package job spells it, for a host that
// treats every backend alike.
func (in Info) Status() job.Status {
	st := job.Status{ID: in.ID, Seq: in.Seq, State: in.State,
		Submitted: in.Submitted, Started: in.Started, Ended: in.Ended}
	if !in.Started.IsZero() || in.State == Running {
		st.Attempt = 1 // one process: a job is never delivered twice
	}
	if in.Result.Reason != 0 {
		st.Reason = in.Result.Reason.String()
	} else if in.State == Cancelled {
		st.Reason = job.ReasonCancelled
	}
	if in.Err != nil {
		st.Error = in.Err.Error()
	}
	return st
}
