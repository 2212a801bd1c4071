package event

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// InteractionStarted is the payload of interaction.started: a question put
// to a person or client.
type InteractionStarted struct {
	InteractionID id.Interaction
	TurnID        id.Turn // the turn that asked; optional
	Prompt        string
}

func (InteractionStarted) Kind() string { return KindInteractionStarted }

func (p InteractionStarted) fields(o *eventlog.Object) {
	o.String("interaction_id", string(p.InteractionID))
	o.OptionalString("turn_id", string(p.TurnID))
	o.String("prompt", p.Prompt)
}

func (p InteractionStarted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p InteractionStarted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readInteractionStarted(d *reader) Payload {
	return InteractionStarted{
		InteractionID: id.Interaction(d.id("interaction_id")),
		TurnID:        id.Turn(d.optionalID("turn_id")),
		Prompt:        d.text("prompt", bound.MaxMessageBytes),
	}
}

// InteractionAnswered is the payload of interaction.answered.
type InteractionAnswered struct {
	InteractionID id.Interaction
	Answer        string // optional: an empty answer is an answer
}

func (InteractionAnswered) Kind() string { return KindInteractionAnswered }

func (p InteractionAnswered) fields(o *eventlog.Object) {
	o.String("interaction_id", string(p.InteractionID))
	o.OptionalString("answer", p.Answer)
}

func (p InteractionAnswered) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p InteractionAnswered) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readInteractionAnswered(d *reader) Payload {
	return InteractionAnswered{
		InteractionID: id.Interaction(d.id("interaction_id")),
		Answer:        d.optionalText("answer", bound.MaxMessageBytes),
	}
}

// InteractionFailed is the payload of interaction.failed.
type InteractionFailed struct {
	InteractionID id.Interaction
	Problem       problem.Problem
}

func (InteractionFailed) Kind() string { return KindInteractionFailed }

func (p InteractionFailed) fields(o *eventlog.Object) {
	o.String("interaction_id", string(p.InteractionID))
	writeProblem(o, "problem", p.Problem)
}

func (p InteractionFailed) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p InteractionFailed) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readInteractionFailed(d *reader) Payload {
	return InteractionFailed{
		InteractionID: id.Interaction(d.id("interaction_id")),
		Problem:       d.problem("problem"),
	}
}

// InteractionCancelled is the payload of interaction.cancelled.
type InteractionCancelled struct {
	InteractionID id.Interaction
}

func (InteractionCancelled) Kind() string { return KindInteractionCancelled }

func (p InteractionCancelled) fields(o *eventlog.Object) {
	o.String("interaction_id", string(p.InteractionID))
}

func (p InteractionCancelled) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p InteractionCancelled) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readInteractionCancelled(d *reader) Payload {
	return InteractionCancelled{InteractionID: id.Interaction(d.id("interaction_id"))}
}
