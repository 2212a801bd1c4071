package orchestrator

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// The two pair kinds of durable pairs. pair.model_output is written only
// when TimelineConfig.Journal is set; pair.resumed only by Resume.
const (
	// KindResumed opens the part of a timeline that a Resume wrote: it
	// says from which recorded sequence, round and run the pair went on.
	KindResumed = "pair.resumed"
	// KindModelOutput journals one model operation's complete output (its
	// text, its tool calls with their arguments, its usage) before the run
	// commits model.completed, so that a resumed pair can serve it again
	// instead of asking the model a second time.
	KindModelOutput = "pair.model_output"
)

// Bounds of the durable-pair payloads.
const (
	// MaxAccepted bounds the uncertain calls one resume may accept.
	MaxAccepted = 64
	// maxJournalBytes bounds one pair.model_output payload: a model
	// operation's text and arguments fit the kernel's bounds, and the
	// event must fit the timeline's.
	maxJournalBytes = eventlog.MaxEventBytes
)

// Resumed is the payload of pair.resumed.
type Resumed struct {
	PairID string `json:"pair_id"`
	// FromSeq is the last sequence recorded before the resume; this event
	// is FromSeq+1.
	FromSeq uint64 `json:"from_seq"`
	// Resumes counts the resumes of the pair, this one included.
	Resumes int `json:"resumes"`
	// Boundary is "run" when the pair goes on after its last completed
	// run (a run or a handoff), "replay" when it restarts an interrupted
	// run from that run's input, serving the outcomes the timeline
	// recorded.
	Boundary string `json:"boundary"`
	// Worker and RunID name the interrupted run that is replayed; empty
	// at a run boundary.
	Worker string `json:"worker,omitempty"`
	RunID  id.Run `json:"run_id,omitempty"`
	// Served counts the recorded model outputs and tool outcomes the
	// replay serves instead of asking again.
	ServedModel int `json:"served_model"`
	ServedTools int `json:"served_tools"`
	// Accepted are the uncertain calls a person accepted as failed: each
	// is answered with an uncertain_tool_call problem and never run again.
	Accepted []id.Call `json:"accepted,omitempty"`
}

func (Resumed) Kind() string { return KindResumed }

func (p Resumed) AppendJSON(dst []byte) []byte { return appendMarshal(dst, p) }
func (p Resumed) EncodedLen() int              { return len(appendMarshal(nil, p)) }

// ModelOutput is the payload of pair.model_output.
type ModelOutput struct {
	Worker       string         `json:"worker"`
	OperationID  id.Operation   `json:"operation_id"`
	Text         string         `json:"text,omitempty"`
	Calls        JournaledCalls `json:"calls,omitempty"`
	InputTokens  int64          `json:"input_tokens"`
	OutputTokens int64          `json:"output_tokens"`
}

// JournaledCall is one tool call a model requested, with its arguments
// exactly as the model sent them.
type JournaledCall struct {
	ID        id.Call `json:"id"`
	Name      string  `json:"name"`
	Arguments string  `json:"arguments"`
}

// JournaledCalls are a model output's calls in order. They are encoded
// as an object keyed by position ("0", "1", ...), so that readers that
// compare payloads field by field (and leave IDs out) reach each call's
// fields.
type JournaledCalls []JournaledCall

func (c JournaledCalls) MarshalJSON() ([]byte, error) {
	m := make(map[string]JournaledCall, len(c))
	for i, call := range c {
		m[strconv.Itoa(i)] = call
	}
	return json.Marshal(m)
}

func (c *JournaledCalls) UnmarshalJSON(b []byte) error {
	var m map[string]JournaledCall
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if len(m) > bound.MaxToolCallsPerOperation {
		return bound.Count("payload.calls", len(m), bound.MaxToolCallsPerOperation)
	}
	out := make(JournaledCalls, len(m))
	for i := range out {
		call, ok := m[strconv.Itoa(i)]
		if !ok {
			return bound.Malformedf("payload.calls", "keys must be the positions 0..n-1")
		}
		out[i] = call
	}
	*c = out
	return nil
}

func (ModelOutput) Kind() string { return KindModelOutput }

func (p ModelOutput) AppendJSON(dst []byte) []byte { return appendMarshal(dst, p) }
func (p ModelOutput) EncodedLen() int              { return len(appendMarshal(nil, p)) }

// appendMarshal encodes v as encoding/json does, which is deterministic:
// these payloads are written once per model operation or resume, never on
// a path that counts allocations.
func appendMarshal(dst []byte, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "{}"...) // unreachable: strings and numbers only
	}
	return append(dst, b...)
}

// readStrict decodes raw into v, refusing unknown fields and trailing
// bytes.
func readStrict(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return bound.Malformedf("payload", "not a valid payload")
	}
	if d.More() {
		return bound.Malformedf("payload", "trailing bytes")
	}
	return nil
}

func readResumed(raw []byte) (eventlog.Payload, error) {
	var p Resumed
	if err := readStrict(raw, &p); err != nil {
		return nil, err
	}
	if err := bound.Count("payload.accepted", len(p.Accepted), MaxAccepted); err != nil {
		return nil, err
	}
	if p.Resumes < 1 || p.ServedModel < 0 || p.ServedTools < 0 {
		return nil, bound.Malformedf("payload", "counts out of range")
	}
	return p, nil
}

func readModelOutput(raw []byte) (eventlog.Payload, error) {
	var p ModelOutput
	if err := readStrict(raw, &p); err != nil {
		return nil, err
	}
	if err := bound.Count("payload.calls", len(p.Calls), bound.MaxToolCallsPerOperation); err != nil {
		return nil, err
	}
	if p.InputTokens < 0 || p.OutputTokens < 0 {
		return nil, bound.Malformedf("payload", "tokens must not be negative")
	}
	return p, nil
}
