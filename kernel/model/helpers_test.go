package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// must is for fixtures that are valid by construction.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func requireBoundError(t *testing.T, err error, field string, rule bound.Rule) *bound.Error {
	t.Helper()
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, field, be.Field)
	require.Equal(t, rule, be.Rule, be.Error())
	require.ErrorIs(t, err, bound.ErrInvalid)
	if rule == bound.TooLarge || rule == bound.TooMany {
		require.ErrorIs(t, err, bound.ErrExceeded)
	}
	return be
}

func newCall(t testing.TB, callID, args string) tool.Call {
	t.Helper()
	return must(tool.NewCall(id.Call(callID), "read_file", []byte(args)))
}

func userMsg(t testing.TB, s string) message.Message {
	t.Helper()
	return must(message.User(s))
}

func definition(t testing.TB, name string) tool.Definition {
	t.Helper()
	return must(tool.NewDefinition(tool.DefinitionConfig{
		Name: name, Description: "d", Effect: tool.ReadOnly, Replay: tool.Safe,
	}))
}

func textDelta(t testing.TB, s string) model.Item {
	t.Helper()
	return must(model.TextDelta(s))
}

func callItem(t testing.TB, callID, args string) model.Item {
	t.Helper()
	return must(model.ToolCall(newCall(t, callID, args)))
}

func failedItem(t testing.TB) model.Item {
	t.Helper()
	return must(model.Failed(problem.Must("rate_limited", "try later")))
}
