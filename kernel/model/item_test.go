package model_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func TestK23_ItemIsAStrictUnion(t *testing.T) {
	d := textDelta(t, "hi")
	require.Equal(t, model.KindTextDelta, d.Kind())
	require.Equal(t, "hi", d.Text())
	_, ok := d.Call()
	require.False(t, ok)
	_, ok = d.Problem()
	require.False(t, ok)
	require.False(t, d.IsTerminal())

	c := newCall(t, "c1", `{"a":1}`)
	ci := must(model.ToolCall(c))
	got, ok := ci.Call()
	require.True(t, ok)
	require.Equal(t, c, got)
	require.Equal(t, "", ci.Text())
	require.False(t, ci.IsTerminal())

	u := must(model.NewUsage(3, 4))
	md := must(model.NewMetadata("openai", []byte(`{"a":1}`)))
	done := model.Completed(u, md)
	require.Equal(t, model.KindCompleted, done.Kind())
	require.Equal(t, u, done.Usage())
	require.Equal(t, md, done.Metadata())
	require.True(t, done.IsTerminal())

	p := problem.Must("overloaded", "")
	f := must(model.Failed(p))
	gp, ok := f.Problem()
	require.True(t, ok)
	require.Equal(t, p, gp)
	require.True(t, f.IsTerminal())
	require.True(t, f.Usage().IsZero())

	var zero model.Item
	require.True(t, zero.IsZero())
	require.Equal(t, model.Kind(0), zero.Kind())
	require.False(t, zero.IsTerminal())

	_, err := model.ToolCall(tool.Call{})
	requireBoundError(t, err, "stream.tool_call", bound.Required)
	_, err = model.Failed(problem.Problem{})
	requireBoundError(t, err, "stream.failed.problem", bound.Required)
	_, err = model.TextDelta("")
	requireBoundError(t, err, "stream.text_delta", bound.Required)
	_, err = model.TextDelta("ok\xff")
	requireBoundError(t, err, "stream.text_delta", bound.Malformed)

	for k, s := range map[model.Kind]string{model.KindTextDelta: "text_delta", model.KindToolCall: "tool_call",
		model.KindCompleted: "completed", model.KindFailed: "failed", 9: "kind(9)"} {
		require.Equal(t, s, k.String())
	}
}

func TestK2_TextDeltaBytes(t *testing.T) {
	at := strings.Repeat("a", bound.MaxTextDeltaBytes)
	it, err := model.TextDelta(at)
	require.NoError(t, err)
	require.Len(t, it.Text(), bound.MaxTextDeltaBytes)
	_, err = model.TextDelta(at + "a")
	be := requireBoundError(t, err, "stream.text_delta", bound.TooLarge)
	require.Equal(t, bound.MaxTextDeltaBytes+1, be.Got)
}

func FuzzTextDelta(f *testing.F) {
	f.Add("hello")
	f.Add("")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2*bound.MaxTextDeltaBytes {
			return
		}
		it, err := model.TextDelta(s)
		if err != nil {
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, "stream.text_delta", be.Field)
			require.True(t, it.IsZero())
			return
		}
		require.Equal(t, s, it.Text())
	})
}
