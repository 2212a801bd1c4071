package event

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// ModelStarted is the payload of model.started: one model operation (a
// streamed request) within a turn.
type ModelStarted struct {
	TurnID      id.Turn
	OperationID id.Operation
	Model       string // optional
}

func (ModelStarted) Kind() string { return KindModelStarted }

func (p ModelStarted) fields(o *eventlog.Object) {
	o.String("turn_id", string(p.TurnID))
	o.String("operation_id", string(p.OperationID))
	o.OptionalString("model", p.Model)
}

func (p ModelStarted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ModelStarted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readModelStarted(d *reader) Payload {
	return ModelStarted{
		TurnID:      id.Turn(d.id("turn_id")),
		OperationID: id.Operation(d.id("operation_id")),
		Model:       d.optionalLabel("model"),
	}
}

// ModelTextDelta is the payload of model.text_delta: one streamed piece of
// text, never empty.
type ModelTextDelta struct {
	OperationID id.Operation
	Text        string
}

func (ModelTextDelta) Kind() string { return KindModelTextDelta }

func (p ModelTextDelta) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.String("text", p.Text)
}

func (p ModelTextDelta) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ModelTextDelta) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readModelTextDelta(d *reader) Payload {
	return ModelTextDelta{
		OperationID: id.Operation(d.id("operation_id")),
		Text:        d.text("text", bound.MaxTextDeltaBytes),
	}
}

// ModelCompleted is the payload of model.completed.
type ModelCompleted struct {
	OperationID  id.Operation
	InputTokens  int64
	OutputTokens int64
	ToolCalls    int // tool calls the model requested
}

func (ModelCompleted) Kind() string { return KindModelCompleted }

func (p ModelCompleted) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	o.Int("input_tokens", p.InputTokens)
	o.Int("output_tokens", p.OutputTokens)
	o.Int("tool_calls", int64(p.ToolCalls))
}

func (p ModelCompleted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ModelCompleted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readModelCompleted(d *reader) Payload {
	p := ModelCompleted{
		OperationID:  id.Operation(d.id("operation_id")),
		InputTokens:  d.tokens("input_tokens"),
		OutputTokens: d.tokens("output_tokens"),
		ToolCalls:    d.count("tool_calls"),
	}
	if d.ok() {
		d.fail(bound.Count(field("tool_calls"), p.ToolCalls, bound.MaxToolCallsPerOperation))
	}
	return p
}

// ModelFailed is the payload of model.failed. Observed reports that the
// stream had produced items before it failed, so the operation must not be
// retried as if nothing had happened (K23).
type ModelFailed struct {
	OperationID id.Operation
	Problem     problem.Problem
	Observed    bool
}

func (ModelFailed) Kind() string { return KindModelFailed }

func (p ModelFailed) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
	writeProblem(o, "problem", p.Problem)
	o.Bool("observed", p.Observed)
}

func (p ModelFailed) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ModelFailed) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readModelFailed(d *reader) Payload {
	return ModelFailed{
		OperationID: id.Operation(d.id("operation_id")),
		Problem:     d.problem("problem"),
		Observed:    d.bool("observed"),
	}
}

// ModelCancelled is the payload of model.cancelled.
type ModelCancelled struct {
	OperationID id.Operation
}

func (ModelCancelled) Kind() string { return KindModelCancelled }

func (p ModelCancelled) fields(o *eventlog.Object) {
	o.String("operation_id", string(p.OperationID))
}

func (p ModelCancelled) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p ModelCancelled) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readModelCancelled(d *reader) Payload {
	return ModelCancelled{OperationID: id.Operation(d.id("operation_id"))}
}
