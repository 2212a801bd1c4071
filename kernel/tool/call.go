package tool

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Call is an immutable request to run one tool, as the model asked for it.
type Call struct {
	id   id.Call
	name string
	args string // compact JSON object
}

// NewCall validates and returns a Call. Arguments must be a JSON object of
// at most bound.MaxToolArgumentsBytes; empty arguments mean {}.
func NewCall(callID id.Call, name string, args []byte) (Call, error) {
	if err := id.Check("tool_call.id", string(callID)); err != nil {
		return Call{}, err
	}
	if err := bound.Name("tool_call.name", name); err != nil {
		return Call{}, err
	}
	a, err := checkArguments(args)
	if err != nil {
		return Call{}, err
	}
	return Call{id: callID, name: name, args: a}, nil
}

func checkArguments(args []byte) (string, error) {
	if len(args) == 0 {
		return "{}", nil
	}
	if err := bound.Bytes("tool_call.arguments", len(args), bound.MaxToolArgumentsBytes); err != nil {
		return "", err
	}
	// encoding/json accepts invalid UTF-8 inside strings; the model and
	// the event log must never see it.
	if !utf8.Valid(args) || !json.Valid(args) {
		return "", bound.Malformedf("tool_call.arguments", "not valid UTF-8 JSON")
	}
	i := 0
	for i < len(args) && (args[i] == ' ' || args[i] == '\t' || args[i] == '\n' || args[i] == '\r') {
		i++
	}
	if args[i] != '{' {
		return "", bound.Malformedf("tool_call.arguments", "must be a JSON object")
	}
	return string(args), nil
}

// ID returns the call ID the provider assigned.
func (c Call) ID() id.Call { return c.id }

// Name returns the tool name.
func (c Call) Name() string { return c.name }

// Arguments returns a copy of the JSON arguments.
func (c Call) Arguments() json.RawMessage { return json.RawMessage(c.args) }

// ArgumentsString returns the JSON arguments without copying.
func (c Call) ArgumentsString() string { return c.args }

// IsZero reports whether c is the zero Call.
func (c Call) IsZero() bool { return c.id == "" }

// Result is an immutable, call-correlated tool outcome the model will see.
// A Result with a Problem is still a result: the loop continues and the
// model reads the problem (K7).
type Result struct {
	callID  id.Call
	content string
	problem problem.Problem
}

// NewResult returns a successful result for callID.
func NewResult(callID id.Call, content string) (Result, error) {
	if err := id.Check("tool_result.call_id", string(callID)); err != nil {
		return Result{}, err
	}
	if err := bound.OptionalText("tool_result.content", content, bound.MaxToolResultBytes); err != nil {
		return Result{}, err
	}
	return Result{callID: callID, content: content}, nil
}

// NewProblemResult returns a result that tells the model what was wrong
// with its call (bad arguments, file not found). content may add detail.
func NewProblemResult(callID id.Call, p problem.Problem, content string) (Result, error) {
	r, err := NewResult(callID, content)
	if err != nil {
		return Result{}, err
	}
	if p.IsZero() {
		return Result{}, bound.Missing("tool_result.problem")
	}
	r.problem = p
	return r, nil
}

// CallID returns the ID of the call this result answers.
func (r Result) CallID() id.Call { return r.callID }

// Content returns the text shown to the model.
func (r Result) Content() string { return r.content }

// Problem returns the model-visible problem, if any.
func (r Result) Problem() (problem.Problem, bool) { return r.problem, !r.problem.IsZero() }

// IsZero reports whether r is the zero Result.
func (r Result) IsZero() bool { return r.callID == "" }
