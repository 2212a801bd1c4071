package event

import (
	"iter"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Run event kinds. Every started lifecycle ends with exactly one of its
// terminal kinds (K15). A kind is the log's plain kind string.
const (
	KindRunStarted   = "run.started"
	KindRunCompleted = "run.completed"
	KindRunFailed    = "run.failed"
	KindRunCancelled = "run.cancelled"

	KindTurnStarted   = "turn.started"
	KindTurnCompleted = "turn.completed"
	KindTurnFailed    = "turn.failed"
	KindTurnCancelled = "turn.cancelled"

	KindModelStarted   = "model.started"
	KindModelTextDelta = "model.text_delta"
	KindModelCompleted = "model.completed"
	KindModelFailed    = "model.failed"
	KindModelCancelled = "model.cancelled"

	KindToolStarted   = "tool.started"
	KindToolProgress  = "tool.progress"
	KindToolCompleted = "tool.completed"
	KindToolFailed    = "tool.failed"
	KindToolCancelled = "tool.cancelled"

	KindInteractionStarted   = "interaction.started"
	KindInteractionAnswered  = "interaction.answered"
	KindInteractionFailed    = "interaction.failed"
	KindInteractionCancelled = "interaction.cancelled"
)

var kinds = [...]string{
	KindRunStarted, KindRunCompleted, KindRunFailed, KindRunCancelled,
	KindTurnStarted, KindTurnCompleted, KindTurnFailed, KindTurnCancelled,
	KindModelStarted, KindModelTextDelta, KindModelCompleted, KindModelFailed, KindModelCancelled,
	KindToolStarted, KindToolProgress, KindToolCompleted, KindToolFailed, KindToolCancelled,
	KindInteractionStarted, KindInteractionAnswered, KindInteractionFailed, KindInteractionCancelled,
}

// Kinds yields every run event kind in a fixed order.
func Kinds() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, k := range kinds {
			if !yield(k) {
				return
			}
		}
	}
}

// Terminal reports whether kind ends a lifecycle: a completed, answered,
// failed or cancelled kind.
func Terminal(kind string) bool {
	switch kind {
	case KindRunCompleted, KindRunFailed, KindRunCancelled,
		KindTurnCompleted, KindTurnFailed, KindTurnCancelled,
		KindModelCompleted, KindModelFailed, KindModelCancelled,
		KindToolCompleted, KindToolFailed, KindToolCancelled,
		KindInteractionAnswered, KindInteractionFailed, KindInteractionCancelled:
		return true
	}
	return false
}

// Payload is a typed run event payload. Each kind has exactly one payload
// type, and the payload names its kind.
type Payload interface {
	eventlog.Payload
	Kind() string
}

// Record returns the log record for p at time t, with the kind and the
// terminal class taken from p.
func Record(t time.Time, p Payload) eventlog.Record {
	k := p.Kind()
	return eventlog.Record{Kind: k, Time: t, Terminal: Terminal(k), Payload: p}
}
