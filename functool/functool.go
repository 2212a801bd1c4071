package functool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// CodeInvalidArguments is the problem code of arguments that do not decode.
const CodeInvalidArguments = "invalid_arguments"

// Config describes the tool; its fields are those of tool.DefinitionConfig
// without the schema, which is derived from the argument type.
type Config struct {
	Name         string
	Description  string
	Effect       tool.Effect
	Replay       tool.Replay
	Capabilities []tool.Capability
}

// Func is the typed function behind a tool.
type Func[A, R any] func(ctx context.Context, args A) (R, error)

// Tool is a tool.Tool that decodes its arguments into A and calls a Func.
type Tool[A, R any] struct {
	def      tool.Definition
	fn       Func[A, R]
	required []string
}

var _ tool.Tool = (*Tool[struct{}, string])(nil)

// New validates cfg, derives the schema from A (a struct) and returns the
// tool. Every error is a *bound.Error.
func New[A, R any](cfg Config, fn Func[A, R]) (*Tool[A, R], error) {
	if fn == nil {
		return nil, bound.Missing("functool.func")
	}
	schema, required, err := schemaOf(reflect.TypeFor[A]())
	if err != nil {
		return nil, err
	}
	def, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: cfg.Name, Description: cfg.Description, Schema: schema,
		Effect: cfg.Effect, Replay: cfg.Replay, Capabilities: cfg.Capabilities,
	})
	if err != nil {
		return nil, err
	}
	return &Tool[A, R]{def: def, fn: fn, required: required}, nil
}

// Must is New for tools whose configuration is known to be valid.
func Must[A, R any](cfg Config, fn Func[A, R]) *Tool[A, R] {
	t, err := New(cfg, fn)
	if err != nil {
		panic(err)
	}
	return t
}

// Definition returns the tool's contract.
func (t *Tool[A, R]) Definition() tool.Definition { return t.def }

// Execute decodes the call's arguments and runs the function.
func (t *Tool[A, R]) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	args, msg := t.decode(call.ArgumentsString())
	if msg != "" {
		return problemResult(call, CodeInvalidArguments, msg)
	}
	out, err := t.fn(context.WithValue(ctx, reporterKey{}, &reporting{call: call, r: r}), args)
	if err != nil {
		return t.fail(ctx, call, err)
	}
	var content string
	switch v := any(out).(type) {
	case string:
		content = v
	default:
		b, err := json.Marshal(out)
		if err != nil {
			return t.fail(ctx, call, err)
		}
		content = string(b)
	}
	res, err := tool.NewResult(call.ID(), content)
	if err != nil {
		return problemResult(call, "result_too_large", "the tool's result exceeds the result bound")
	}
	return res, nil
}

func (t *Tool[A, R]) decode(raw string) (A, string) {
	var args A
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return args, "the arguments are not a JSON object"
	}
	for _, name := range t.required {
		if v, ok := fields[name]; !ok || bytes.Equal(v, []byte("null")) {
			return args, "the argument " + name + " is required"
		}
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return args, describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return args, "the arguments hold data after the object"
	}
	return args, ""
}

// describe words a decoding error for the model without quoting values.
func describe(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return "the argument " + te.Field + " must be of JSON type " + jsonKind(te.Type)
		}
		return "the arguments do not match the schema"
	}
	if m := err.Error(); strings.HasPrefix(m, "json: unknown field ") {
		return "unknown argument " + strings.TrimPrefix(m, "json: unknown field ")
	}
	return "the arguments do not match the schema"
}

func (t *Tool[A, R]) fail(ctx context.Context, call tool.Call, err error) (tool.Result, error) {
	var pe *ProblemError
	if errors.As(err, &pe) {
		return problemResult(call, pe.Code, pe.Message)
	}
	mutating := t.def.Effect() == tool.Mutating
	var un *unchanged
	if errors.As(err, &un) {
		mutating = false
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		if mutating {
			return tool.Result{}, tool.FailUncertain(call.ID(), problemCanceledMidway, cerr)
		}
		return tool.Result{}, tool.Canceled(call.ID(), cerr)
	}
	if mutating {
		return tool.Result{}, tool.FailUncertain(call.ID(), problemFailedMidway, err)
	}
	return tool.Result{}, tool.Fail(call.ID(), problemFailed)
}

var (
	problemFailed         = problem.Must("tool_failed", "the tool failed; nothing was changed")
	problemFailedMidway   = problem.Must("tool_failed", "the tool failed and may have taken effect")
	problemCanceledMidway = problem.Must("canceled", "the call was cancelled and may have taken effect")
)

func problemResult(call tool.Call, code, msg string) (tool.Result, error) {
	p, err := problem.New(code, msg)
	if err != nil {
		p = problem.Must(CodeInvalidArguments, "the arguments do not match the schema")
	}
	return tool.NewProblemResult(call.ID(), p, p.Message())
}

// ProblemError is an error a function returns to end the call with a
// model-visible problem result.
type ProblemError struct {
	Code    string // a bound.Name such as "not_found"
	Message string
}

func (e *ProblemError) Error() string { return e.Code + ": " + e.Message }

// Problem returns a *ProblemError.
func Problem(code, message string) error { return &ProblemError{Code: code, Message: message} }

type unchanged struct{ err error }

func (u *unchanged) Error() string { return u.err.Error() }
func (u *unchanged) Unwrap() error { return u.err }

// Unchanged marks the error of a mutating tool's function as definitive:
// the function failed before it changed anything.
func Unchanged(err error) error { return &unchanged{err: err} }

type reporterKey struct{}

type reporting struct {
	call tool.Call
	r    tool.Reporter
}

// Report sends one progress message of the running call from inside its
// function. Outside a call, or with an invalid message, it returns an error
// and sends nothing.
func Report(ctx context.Context, message string) error {
	rp, _ := ctx.Value(reporterKey{}).(*reporting)
	if rp == nil || rp.r == nil {
		return errors.New("functool: Report outside a call")
	}
	p, err := tool.NewProgress(rp.call.ID(), message)
	if err != nil {
		return err
	}
	return rp.r.Report(ctx, p)
}
