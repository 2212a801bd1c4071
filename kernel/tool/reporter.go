package tool

import (
	"context"
	"errors"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
)

// Errors a tool receives from the reporter the dispatcher hands it.
var (
	// ErrReporterClosed: Report was called after Execute returned (K9).
	// The report is dropped.
	ErrReporterClosed = errors.New("tool: progress reported after Execute returned")
	// ErrForeignProgress: the report names another call. It is dropped,
	// whether or not the tool looks at this error.
	ErrForeignProgress = errors.New("tool: progress for another call")
	// ErrReporterPanic is recorded as the reporter failure when the
	// underlying Reporter panics.
	ErrReporterPanic = errors.New("tool: progress reporter panicked")
)

// callReporter is the Reporter a tool sees during one call. It forwards
// only progress for the active call, only while Execute runs, and keeps the
// first error of the underlying Reporter for the DispatchFailure (K9).
//
// It is allocated per call and never reused: a tool that keeps it past
// Execute must find it closed, not attached to somebody else's call.
type callReporter struct {
	mu      sync.Mutex
	callID  id.Call
	next    Reporter // nil: progress is accepted and discarded
	closed  bool
	failure error
}

// Report implements Reporter. Reports are serialized; close waits for an
// in-flight report, so nothing is forwarded after Execute has returned.
func (r *callReporter) Report(ctx context.Context, p Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrReporterClosed
	}
	if p.CallID() != r.callID {
		return ErrForeignProgress
	}
	if r.next == nil {
		return nil
	}
	err := r.forward(ctx, p)
	if err != nil && r.failure == nil {
		r.failure = err
	}
	return err
}

func (r *callReporter) forward(ctx context.Context, p Progress) (err error) {
	defer func() {
		if recover() != nil {
			err = ErrReporterPanic
		}
	}()
	return r.next.Report(ctx, p)
}

// close detaches the reporter and returns the first failure of the
// underlying Reporter.
func (r *callReporter) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.next = nil
	return r.failure
}

// ErrNoAsker is returned by Ask when the run gave the call no way to ask a
// question.
var ErrNoAsker = errors.New("tool: questions are not available to this call")

var _ interaction.Asker = (*callReporter)(nil)

// Ask forwards a question to the underlying Reporter when it is an
// interaction.Asker, only while Execute runs. The wait for the answer does
// not hold the reporter's lock: the run cancels questions still in flight
// when the call ends (K28).
func (r *callReporter) Ask(ctx context.Context, prompt string, choices ...string) (answer string, err error) {
	r.mu.Lock()
	closed, next := r.closed, r.next
	r.mu.Unlock()
	if closed {
		return "", ErrReporterClosed
	}
	a, ok := next.(interaction.Asker)
	if !ok {
		return "", ErrNoAsker
	}
	defer func() {
		if recover() != nil {
			answer, err = "", ErrReporterPanic
		}
	}()
	return a.Ask(ctx, prompt, choices...)
}
