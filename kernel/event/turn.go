package event

import (
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// TurnStarted is the payload of turn.started.
type TurnStarted struct {
	RunID  id.Run
	TurnID id.Turn
	Index  int // 1 for the run's first turn
}

func (TurnStarted) Kind() string { return KindTurnStarted }

func (p TurnStarted) fields(o *eventlog.Object) {
	o.String("run_id", string(p.RunID))
	o.String("turn_id", string(p.TurnID))
	o.Int("index", int64(p.Index))
}

func (p TurnStarted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p TurnStarted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readTurnStarted(d *reader) Payload {
	return TurnStarted{RunID: id.Run(d.id("run_id")), TurnID: id.Turn(d.id("turn_id")), Index: d.count("index")}
}

// TurnCompleted is the payload of turn.completed.
type TurnCompleted struct {
	TurnID id.Turn
	Index  int
}

func (TurnCompleted) Kind() string { return KindTurnCompleted }

func (p TurnCompleted) fields(o *eventlog.Object) {
	o.String("turn_id", string(p.TurnID))
	o.Int("index", int64(p.Index))
}

func (p TurnCompleted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p TurnCompleted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readTurnCompleted(d *reader) Payload {
	return TurnCompleted{TurnID: id.Turn(d.id("turn_id")), Index: d.count("index")}
}

// TurnFailed is the payload of turn.failed.
type TurnFailed struct {
	TurnID  id.Turn
	Index   int
	Problem problem.Problem
}

func (TurnFailed) Kind() string { return KindTurnFailed }

func (p TurnFailed) fields(o *eventlog.Object) {
	o.String("turn_id", string(p.TurnID))
	o.Int("index", int64(p.Index))
	writeProblem(o, "problem", p.Problem)
}

func (p TurnFailed) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p TurnFailed) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readTurnFailed(d *reader) Payload {
	return TurnFailed{TurnID: id.Turn(d.id("turn_id")), Index: d.count("index"), Problem: d.problem("problem")}
}

// TurnCancelled is the payload of turn.cancelled.
type TurnCancelled struct {
	TurnID id.Turn
	Index  int
}

func (TurnCancelled) Kind() string { return KindTurnCancelled }

func (p TurnCancelled) fields(o *eventlog.Object) {
	o.String("turn_id", string(p.TurnID))
	o.Int("index", int64(p.Index))
}

func (p TurnCancelled) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p TurnCancelled) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readTurnCancelled(d *reader) Payload {
	return TurnCancelled{TurnID: id.Turn(d.id("turn_id")), Index: d.count("index")}
}
