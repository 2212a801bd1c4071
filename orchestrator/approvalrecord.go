package orchestrator

import (
	"iter"
	"slices"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// RecordedApprovals is what one run's recorded events say of its approval
// questions, for a process that continues a pair another process played.
type RecordedApprovals struct {
	// Waiting are the questions asked and never ended, in the order
	// asked: the process that asked them stopped while they waited.
	Waiting []Approval
	// NotRun are the calls that approval stopped before they ran: their
	// question was denied, timed out, failed, or never answered. The
	// approval guard runs after tool.started and before the tool, so such
	// a call can lack an outcome in the record and still never have run;
	// it is not uncertain.
	NotRun map[id.Call]bool
}

// ReadApprovals reads the approval questions among one run's events, in
// their recorded order. Questions that are not approvals are skipped.
func ReadApprovals(run iter.Seq[eventlog.Payload]) RecordedApprovals {
	asked := make(map[id.Interaction]Approval)
	var order []id.Interaction
	approved := make(map[id.Call]bool)
	for p := range run {
		switch e := p.(type) {
		case event.InteractionStarted:
			a, err := parseApprovalPrompt(e.Prompt)
			if err != nil {
				continue
			}
			a.Question = e.InteractionID
			asked[e.InteractionID] = a
			order = append(order, e.InteractionID)
		case event.InteractionAnswered:
			if a, ok := asked[e.InteractionID]; ok {
				approved[a.Call] = e.Answer == ApprovalAnswer(a.Digest, true)
				delete(asked, e.InteractionID)
			}
		case event.InteractionFailed:
			if a, ok := asked[e.InteractionID]; ok {
				approved[a.Call] = false
				delete(asked, e.InteractionID)
			}
		case event.InteractionCancelled:
			if a, ok := asked[e.InteractionID]; ok {
				approved[a.Call] = false
				delete(asked, e.InteractionID)
			}
		}
	}
	out := RecordedApprovals{NotRun: make(map[id.Call]bool)}
	for c, ok := range approved {
		if !ok {
			out.NotRun[c] = true
		}
	}
	for _, q := range order {
		if a, ok := asked[q]; ok {
			out.Waiting = append(out.Waiting, a)
			out.NotRun[a.Call] = true
		}
	}
	out.Waiting = slices.Clip(out.Waiting)
	return out
}

// isApprovalPrompt reports whether prompt looks like an approval question
// of this version; parseApprovalPrompt decides.
func isApprovalPrompt(prompt string) bool {
	return strings.HasPrefix(prompt, `{"type":"`+ApprovalKind+`"`)
}
