package scheduler

import (
	"context"
	"errors"
	"strconv"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/orchestrator"
)

var (
	// ErrQueueFull is matched by every *QueueFullError.
	ErrQueueFull = errors.New("scheduler: queue full")
	// ErrClosed is returned by Submit after Close or Shutdown.
	ErrClosed = errors.New("scheduler: closed")
	// ErrNotFound names a job the scheduler does not know, or no longer
	// keeps (Config.Retain). It matches job.ErrNotFound.
	ErrNotFound error = notFoundError{}
	// ErrNoTimeline is returned by Subscribe for a job that ended without
	// starting its pair.
	ErrNoTimeline = errors.New("scheduler: the job has no pair timeline")
	// ErrCancelled is the Info.Err of a job cancelled before its pair
	// started. It matches orchestrator.ErrCancelled (the Err of a job whose
	// pair was cancelled) and context.Canceled, so one errors.Is check
	// covers both.
	ErrCancelled = cancelledError{}
	// errPanic is the cause of a contained panic; the value is dropped.
	errPanic = errors.New("scheduler: panic contained")
)

type notFoundError struct{}

func (notFoundError) Error() string { return "scheduler: no such job" }

func (notFoundError) Is(target error) bool { return target == job.ErrNotFound }

type cancelledError struct{}

func (cancelledError) Error() string { return "scheduler: job cancelled before its pair started" }

func (cancelledError) Is(target error) bool {
	return target == orchestrator.ErrCancelled || target == context.Canceled
}

// QueueFullError is Submit's refusal when Config.Queue jobs are already
// waiting. Submit never waits for room: the host decides whether to retry,
// shed or wait for a job to end.
type QueueFullError struct {
	Limit int // Config.Queue
}

func (e *QueueFullError) Error() string {
	return "scheduler: queue full (" + strconv.Itoa(e.Limit) + " jobs waiting)"
}

// Is matches ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }
