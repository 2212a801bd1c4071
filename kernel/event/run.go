package event

import (
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// RunStarted is the payload of run.started: the run and the plan it leased.
type RunStarted struct {
	RunID           id.Run
	PlanID          string // the leased plan's ID
	PlanFingerprint string // the leased plan's fingerprint (hex)
	Definition      string // the definition's name; optional
	Model           string // the model's name; optional
}

func (RunStarted) Kind() string { return KindRunStarted }

func (p RunStarted) fields(o *eventlog.Object) {
	o.String("run_id", string(p.RunID))
	o.String("plan_id", p.PlanID)
	o.String("plan_fingerprint", p.PlanFingerprint)
	o.OptionalString("definition", p.Definition)
	o.OptionalString("model", p.Model)
}

func (p RunStarted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p RunStarted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readRunStarted(d *reader) Payload {
	return RunStarted{
		RunID:           id.Run(d.id("run_id")),
		PlanID:          d.id("plan_id"),
		PlanFingerprint: d.text("plan_fingerprint", bound.MaxIDBytes),
		Definition:      d.optionalLabel("definition"),
		Model:           d.optionalLabel("model"),
	}
}

// usage writes what a run consumed, the same way in every run terminal.
func usage(o *eventlog.Object, turns int, in, out int64) {
	o.Int("turns", int64(turns))
	o.Int("input_tokens", in)
	o.Int("output_tokens", out)
}

func readUsage(d *reader) (turns int, in, out int64) {
	return d.count("turns"), d.tokens("input_tokens"), d.tokens("output_tokens")
}

// RunCompleted is the payload of run.completed.
type RunCompleted struct {
	RunID        id.Run
	Turns        int
	InputTokens  int64
	OutputTokens int64
	FinalText    string // the final assistant text; optional
}

func (RunCompleted) Kind() string { return KindRunCompleted }

func (p RunCompleted) fields(o *eventlog.Object) {
	o.String("run_id", string(p.RunID))
	usage(o, p.Turns, p.InputTokens, p.OutputTokens)
	o.OptionalString("final_text", p.FinalText)
}

func (p RunCompleted) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p RunCompleted) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readRunCompleted(d *reader) Payload {
	p := RunCompleted{RunID: id.Run(d.id("run_id"))}
	p.Turns, p.InputTokens, p.OutputTokens = readUsage(d)
	p.FinalText = d.optionalText("final_text", bound.MaxMessageBytes)
	return p
}

// RunFailed is the payload of run.failed.
type RunFailed struct {
	RunID        id.Run
	Problem      problem.Problem
	Turns        int
	InputTokens  int64
	OutputTokens int64
}

func (RunFailed) Kind() string { return KindRunFailed }

func (p RunFailed) fields(o *eventlog.Object) {
	o.String("run_id", string(p.RunID))
	writeProblem(o, "problem", p.Problem)
	usage(o, p.Turns, p.InputTokens, p.OutputTokens)
}

func (p RunFailed) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p RunFailed) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readRunFailed(d *reader) Payload {
	p := RunFailed{RunID: id.Run(d.id("run_id")), Problem: d.problem("problem")}
	p.Turns, p.InputTokens, p.OutputTokens = readUsage(d)
	return p
}

// RunCancelled is the payload of run.cancelled.
type RunCancelled struct {
	RunID        id.Run
	Turns        int
	InputTokens  int64
	OutputTokens int64
}

func (RunCancelled) Kind() string { return KindRunCancelled }

func (p RunCancelled) fields(o *eventlog.Object) {
	o.String("run_id", string(p.RunID))
	usage(o, p.Turns, p.InputTokens, p.OutputTokens)
}

func (p RunCancelled) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}
func (p RunCancelled) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readRunCancelled(d *reader) Payload {
	p := RunCancelled{RunID: id.Run(d.id("run_id"))}
	p.Turns, p.InputTokens, p.OutputTokens = readUsage(d)
	return p
}
