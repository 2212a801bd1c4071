package render

import (
	"encoding/json"
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// The pair payloads as the orchestrator encodes them (orchestrator
// timeline.go). Fields this package does not show are left out; unknown
// ones are ignored.
type started struct {
	PairID  string `json:"pair_id"`
	PlanID  string `json:"plan_id"`
	Pattern string `json:"pattern"`
	Workers struct {
		First  string `json:"first"`
		Second string `json:"second"`
	} `json:"workers"`
}

type handedOff struct {
	Round       int    `json:"round"`
	From        string `json:"from"`
	To          string `json:"to"`
	FromRunID   string `json:"from_run_id"`
	SHA256      string `json:"sha256"`
	Bytes       int    `json:"bytes"`
	AnswerBytes int    `json:"answer_bytes"`
	Cut         bool   `json:"cut"`
}

type ended struct {
	PairID       string `json:"pair_id"`
	Reason       string `json:"reason"`
	Limit        string `json:"limit"`
	Rounds       int    `json:"rounds"`
	Runs         int    `json:"runs"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	ToolCalls    int64  `json:"tool_calls"`
	Worker       string `json:"worker"`
	RunID        string `json:"run_id"`
	Problem      struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"problem"`
}

type relayed struct {
	Worker  string          `json:"worker"`
	RunID   string          `json:"run_id"`
	RunSeq  uint64          `json:"run_seq"`
	Payload json.RawMessage `json:"payload"`
}

// entry is one decoded timeline event.
type entry struct {
	seq     uint64
	kind    string
	time    time.Time
	started *started
	handoff *handedOff
	ended   *ended
	relay   *relayed
	run     event.Payload // the relayed kernel payload; nil if unknown
}

// decode reads one canonical event line (without its newline).
func decode(line []byte) (entry, error) {
	ev, err := eventlog.Decode(line)
	if err != nil {
		return entry{}, err
	}
	en := entry{seq: ev.Seq(), kind: ev.Kind(), time: ev.Time()}
	payload := ev.Payload().AppendJSON(nil)
	switch {
	case en.kind == orchestrator.KindStarted:
		en.started = new(started)
		err = json.Unmarshal(payload, en.started)
	case en.kind == orchestrator.KindHandoff:
		en.handoff = new(handedOff)
		err = json.Unmarshal(payload, en.handoff)
	case orchestrator.Terminal(en.kind):
		en.ended = new(ended)
		err = json.Unmarshal(payload, en.ended)
	default:
		en.relay = new(relayed)
		if err = json.Unmarshal(payload, en.relay); err == nil && len(en.relay.Payload) > 0 {
			// A kind this build does not know stays generic.
			en.run, _ = event.DecodePayload(en.kind, en.relay.Payload)
		}
	}
	if err != nil {
		return entry{}, err
	}
	return en, nil
}
