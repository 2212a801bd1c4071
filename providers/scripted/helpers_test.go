package scripted_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func def(name string) tool.Definition {
	return must(tool.NewDefinition(tool.DefinitionConfig{Name: name, Effect: tool.ReadOnly, Replay: tool.Safe}))
}

// defs are the tool definitions every test request offers.
var defs = []tool.Definition{def("fs.read"), def("fs.write"), def("text.stats"), def("echo")}

func user(s string) message.Message { return must(message.User(s)) }

func assistant(text string, calls ...tool.Call) message.Message {
	return must(message.Assistant(text, calls...))
}

func call(callID, name, args string) tool.Call {
	return must(tool.NewCall(id.Call(callID), name, []byte(args)))
}

func results(callIDs ...string) message.Message {
	rs := make([]tool.Result, len(callIDs))
	for i, c := range callIDs {
		rs[i] = must(tool.NewResult(id.Call(c), "ok"))
	}
	return must(message.Results(rs...))
}

func request(t testing.TB, op string, msgs ...message.Message) model.Request {
	t.Helper()
	r, err := model.NewRequest(model.RequestConfig{Operation: id.Operation(op), Model: "scripted", Messages: msgs, Tools: defs})
	require.NoError(t, err)
	return r
}

func provider(t testing.TB, s scripted.Script) *scripted.Provider {
	t.Helper()
	p, err := scripted.NewProvider(s)
	require.NoError(t, err)
	return p
}

// drain reads a stream to io.EOF, checking it with a model.Assembler
// exactly as the engine does (K23), and returns the items.
func drain(t testing.TB, s model.Stream) []model.Item {
	t.Helper()
	var a model.Assembler
	var items []model.Item
	for {
		it, err := s.Recv()
		if errors.Is(err, io.EOF) {
			require.NoError(t, a.End())
			break
		}
		require.NoError(t, err)
		require.NoError(t, a.Add(it))
		items = append(items, it)
	}
	require.NoError(t, s.Close())
	return items
}

func streamItems(t testing.TB, p *scripted.Provider, req model.Request) []model.Item {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	require.NoError(t, err)
	return drain(t, s)
}

// answer returns the text and call names of a completed stream.
func answer(t testing.TB, items []model.Item) (text string, calls []string) {
	t.Helper()
	for _, it := range items {
		text += it.Text()
		if c, ok := it.Call(); ok {
			calls = append(calls, c.Name())
		}
	}
	require.Equal(t, model.KindCompleted, items[len(items)-1].Kind())
	return text, calls
}

func requireFailed(t testing.TB, items []model.Item, code string) {
	t.Helper()
	require.Len(t, items, 1)
	p, ok := items[0].Problem()
	require.True(t, ok, "want a Failed item, got %v", items[0].Kind())
	require.Equal(t, code, p.Code())
}

func requireBoundError(t testing.TB, err error, field string, rule bound.Rule) {
	t.Helper()
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, field, be.Field, be.Error())
	require.Equal(t, rule, be.Rule, be.Error())
	require.ErrorIs(t, err, bound.ErrInvalid)
}
