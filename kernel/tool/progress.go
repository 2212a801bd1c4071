package tool

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// Progress is an immutable, call-correlated progress report.
type Progress struct {
	callID  id.Call
	message string
}

// NewProgress validates and returns a progress report for callID.
func NewProgress(callID id.Call, message string) (Progress, error) {
	if err := id.Check("progress.call_id", string(callID)); err != nil {
		return Progress{}, err
	}
	if err := bound.Text("progress.message", message, bound.MaxProgressBytes); err != nil {
		return Progress{}, err
	}
	return Progress{callID: callID, message: message}, nil
}

// CallID returns the call this report belongs to.
func (p Progress) CallID() id.Call { return p.callID }

// Message returns the progress text.
func (p Progress) Message() string { return p.message }
