package functool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/functool"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

type args struct {
	Text  string   `json:"text" desc:"what to say"`
	Times int      `json:"times,omitempty"`
	Tags  []string `json:"tags,omitempty"`
	Opt   *bool    `json:"opt"`
}

type out struct {
	Said string `json:"said"`
}

func call(t *testing.T, a string) tool.Call {
	c, err := tool.NewCall(id.Call("c1"), "say", []byte(a))
	require.NoError(t, err)
	return c
}

func dispatch(t *testing.T, tl tool.Tool, a string) (tool.Result, error) {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{tl}})
	require.NoError(t, err)
	return d.Dispatch(context.Background(), call(t, a), nil)
}

func TestFuncTool_SchemaFromTheArgumentStruct(t *testing.T) {
	tl, err := functool.New(functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Safe},
		func(_ context.Context, a args) (out, error) { return out{Said: a.Text}, nil })
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"object","additionalProperties":false,"required":["text"],"properties":{
		"text":{"type":"string","description":"what to say"},"times":{"type":"integer"},
		"tags":{"type":"array","items":{"type":"string"}},"opt":{"type":"boolean"}}}`, tl.Definition().SchemaString())
	res, err := dispatch(t, tl, `{"text":"hi","times":2}`)
	require.NoError(t, err)
	require.Equal(t, `{"said":"hi"}`, res.Content())
}

func TestFuncTool_BadArgumentsAreAModelVisibleProblem(t *testing.T) {
	ran := false
	tl := functool.Must(functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Safe},
		func(_ context.Context, a args) (string, error) { ran = true; return a.Text, nil })
	for a, want := range map[string]string{
		`{}`:                       "the argument text is required",
		`{"text":null}`:            "the argument text is required",
		`{"text":1}`:               "the argument text must be of JSON type string",
		`{"text":"x","extra":1}`:   `unknown argument "extra"`,
		`{"text":"x","times":"2"}`: "the argument times must be of JSON type integer",
	} {
		res, err := dispatch(t, tl, a)
		require.NoError(t, err, a)
		p, ok := res.Problem()
		require.True(t, ok, a)
		require.Equal(t, functool.CodeInvalidArguments, p.Code())
		require.Equal(t, want, p.Message(), a)
	}
	require.False(t, ran)
}

func TestFuncTool_ErrorsBecomeTypedOutcomes(t *testing.T) {
	boom := errors.New("disk on fire")
	mk := func(eff tool.Effect, rep tool.Replay, err error) tool.Tool {
		return functool.Must(functool.Config{Name: "say", Effect: eff, Replay: rep},
			func(context.Context, args) (string, error) { return "", err })
	}
	res, err := dispatch(t, mk(tool.ReadOnly, tool.Safe, functool.Problem("not_found", "no such thing")), `{"text":"x"}`)
	require.NoError(t, err)
	p, _ := res.Problem()
	require.Equal(t, "not_found", p.Code())

	var ee *tool.ExecutionError
	_, err = dispatch(t, mk(tool.ReadOnly, tool.Safe, boom), `{"text":"x"}`)
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.NotContains(t, err.Error(), "fire")

	_, err = dispatch(t, mk(tool.Mutating, tool.Idempotent, boom), `{"text":"x"}`)
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Uncertain, ee.Outcome())

	_, err = dispatch(t, mk(tool.Mutating, tool.Idempotent, functool.Unchanged(boom)), `{"text":"x"}`)
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome())
}

func TestFuncTool_ReportSendsProgress(t *testing.T) {
	tl := functool.Must(functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Safe},
		func(ctx context.Context, a args) (string, error) { return a.Text, functool.Report(ctx, "working") })
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{tl}})
	require.NoError(t, err)
	var got []string
	_, err = d.Dispatch(context.Background(), call(t, `{"text":"x"}`), reporter(func(p tool.Progress) { got = append(got, p.Message()) }))
	require.NoError(t, err)
	require.Equal(t, []string{"working"}, got)
	require.Error(t, functool.Report(context.Background(), "outside"))
}

type reporter func(tool.Progress)

func (r reporter) Report(_ context.Context, p tool.Progress) error { r(p); return nil }

func TestFuncTool_ConstructionErrors(t *testing.T) {
	_, err := functool.New(functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Safe},
		func(context.Context, int) (string, error) { return "", nil })
	require.Error(t, err, "the argument type must be a struct")
	_, err = functool.New(functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Unsafe},
		func(context.Context, args) (string, error) { return "", nil })
	require.Error(t, err, "K4 contradiction")
	_, err = functool.New[args, string](functool.Config{Name: "say", Effect: tool.ReadOnly, Replay: tool.Safe}, nil)
	require.Error(t, err)
}
