package event

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Tool payloads carry the tool's effect, replay safety, outcome and retry
// advice as the words the tool package defines ("read_only", "idempotent",
// "uncertain", ...); this package records them and does not interpret them.

// ToolStarted is the payload of tool.started: one tool operation running
// one call the model requested.
type ToolStarted struct {
	TurnID      id.Turn
	OperationID id.Operation
	CallID      id.Call
	Name        string // the tool's name
	Effect      string // "read_only" or "mutating"; empty for a tool the plan lacks
	Replay      string // "safe", "idempotent" or "unsafe"; empty likewise
}

func (ToolStarted) Kind() string { return KindToolStarted }

func (p ToolStarted) fields(o *eventlog.Object) {
	o.String("turn_id", string(p.TurnID))
	o.String("operation_id", string(p.OperationID))
	o.String("call_id", string(p.CallID))
	o.String("name", p.Name)
	o.OptionalString("effect", p.Effect)
	o.OptionalString("replay", p.Replay)
}

func (p ToolStarted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ToolStarted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readToolStarted(d *reader) Payload {
	return ToolStarted{
		TurnID:      id.Turn(d.id("turn_id")),
		OperationID: id.Operation(d.id("operation_id")),
		CallID:      id.Call(d.id("call_id")),
		Name:        d.label("name"),
		Effect:      d.optionalLabel("effect"),
		Replay:      d.optionalLabel("replay"),
	}
}

// ToolProgress is the payload of tool.progress: one progress report.
type ToolProgress struct {
	OperationID id.Operation
	CallID      id.Call
	Message     string
}

func (ToolProgress) Kind() string { return KindToolProgress }

func (p ToolProgress) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.String("call_id", string(p.CallID))
	o.String("message", p.Message)
}

func (p ToolProgress) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ToolProgress) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readToolProgress(d *reader) Payload {
	return ToolProgress{
		OperationID: id.Operation(d.id("operation_id")),
		CallID:      id.Call(d.id("call_id")),
		Message:     d.text("message", bound.MaxProgressBytes),
	}
}

// ToolCompleted is the payload of tool.completed: the tool returned a valid
// result. A model-visible problem, if any, is part of that result; the loop
// continues with it (K7).
type ToolCompleted struct {
	OperationID id.Operation
	CallID      id.Call
	Name        string
	Content     string          // optional
	Problem     problem.Problem // optional, model-visible
}

func (ToolCompleted) Kind() string { return KindToolCompleted }

func (p ToolCompleted) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.String("call_id", string(p.CallID))
	o.String("name", p.Name)
	o.OptionalString("content", p.Content)
	writeOptionalProblem(o, "problem", p.Problem)
}

func (p ToolCompleted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ToolCompleted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readToolCompleted(d *reader) Payload {
	return ToolCompleted{
		OperationID: id.Operation(d.id("operation_id")),
		CallID:      id.Call(d.id("call_id")),
		Name:        d.label("name"),
		Content:     d.optionalText("content", bound.MaxToolResultBytes),
		Problem:     d.optionalProblem("problem"),
	}
}

// ToolFailed is the payload of tool.failed: an execution error, definitive
// or uncertain, with its retry advice (K7).
type ToolFailed struct {
	OperationID id.Operation
	CallID      id.Call
	Name        string
	Outcome     string // "definitive" or "uncertain"
	Retry       string // retry advice; optional
	Problem     problem.Problem
}

func (ToolFailed) Kind() string { return KindToolFailed }

func (p ToolFailed) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.String("call_id", string(p.CallID))
	o.String("name", p.Name)
	o.String("outcome", p.Outcome)
	o.OptionalString("retry", p.Retry)
	writeProblem(o, "problem", p.Problem)
}

func (p ToolFailed) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ToolFailed) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readToolFailed(d *reader) Payload {
	return ToolFailed{
		OperationID: id.Operation(d.id("operation_id")),
		CallID:      id.Call(d.id("call_id")),
		Name:        d.label("name"),
		Outcome:     d.label("outcome"),
		Retry:       d.optionalLabel("retry"),
		Problem:     d.problem("problem"),
	}
}

// ToolCancelled is the payload of tool.cancelled. Outcome says whether the
// cancelled call may have had its effect.
type ToolCancelled struct {
	OperationID id.Operation
	CallID      id.Call
	Name        string
	Outcome     string
}

func (ToolCancelled) Kind() string { return KindToolCancelled }

func (p ToolCancelled) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.String("call_id", string(p.CallID))
	o.String("name", p.Name)
	o.String("outcome", p.Outcome)
}

func (p ToolCancelled) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ToolCancelled) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readToolCancelled(d *reader) Payload {
	return ToolCancelled{
		OperationID: id.Operation(d.id("operation_id")),
		CallID:      id.Call(d.id("call_id")),
		Name:        d.label("name"),
		Outcome:     d.label("outcome"),
	}
}
