package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// callThenAnswer is the smallest tool-using script: one call, one answer.
var callThenAnswer = scripted.Script{Steps: []scripted.Step{
	{Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(`{"x":1}`)}}},
	{Text: "done"},
}}

func TestSelect_PositionComesFromTheHistory(t *testing.T) {
	p := provider(t, callThenAnswer)

	// k=0: nothing answered yet for this input.
	text, calls := answer(t, streamItems(t, p, request(t, "op-1", user("go"))))
	require.Empty(t, text)
	require.Equal(t, []string{"echo"}, calls)

	// k=1: the tool results came back; the script continues with step 2.
	h := []message.Message{user("go"), assistant("", call("op-1-c1", "echo", `{"x":1}`)), results("op-1-c1")}
	req := request(t, "op-2", h...)
	text, calls = answer(t, streamItems(t, p, req))
	require.Equal(t, "done", text)
	require.Empty(t, calls)

	// k=2: the script has no third step for this input.
	h = append(h, assistant("done"))
	requireFailed(t, streamItems(t, p, request(t, "op-3", h...)), scripted.CodeScriptExhausted)
}

func TestSelect_ToolResultContinuationOverSeveralToolTurns(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{
		{Calls: []scripted.CallSpec{{Name: "fs.read", Arguments: json.RawMessage(`{"path":"a"}`)}}},
		{Text: "reading more", Calls: []scripted.CallSpec{{Name: "fs.read", Arguments: json.RawMessage(`{"path":"b"}`)}, {Name: "text.stats"}}},
		{Text: "final"},
	}})
	h := []message.Message{user("task")}
	var texts []string
	for i, op := range []string{"op-1", "op-2", "op-3"} {
		items := streamItems(t, p, request(t, op, h...))
		text, _ := answer(t, items)
		texts = append(texts, text)
		var cs []tool.Call
		var ids []string
		for _, it := range items {
			if c, ok := it.Call(); ok {
				cs = append(cs, c)
				ids = append(ids, string(c.ID()))
			}
		}
		h = append(h, assistant(text, cs...))
		if len(ids) > 0 {
			h = append(h, results(ids...))
		}
		require.Equal(t, i < 2, len(ids) > 0, "operation %d", i)
	}
	require.Equal(t, []string{"", "reading more", "final"}, texts)
}

func TestSelect_MatchesTheLastUserMessage(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{
		{Match: "Reviewer feedback", Text: "revised"},
		{Match: "not:Reviewer feedback", Text: "first"},
		{Text: "always"},
		{Match: "re:(?i)^please\\b", Text: "polite"},
		{Match: "text:re:x", Text: "literal prefix"},
	}})
	cases := []struct {
		input string
		want  []string // answers for k = 0, 1, ...
	}{
		{"write a note", []string{"first", "always"}},
		{"Reviewer feedback: add an example", []string{"revised", "always"}},
		{"PLEASE write", []string{"first", "always", "polite"}},
		{"see re:x", []string{"first", "always", "literal prefix"}},
	}
	for _, c := range cases {
		h := []message.Message{user(c.input)}
		for k, want := range c.want {
			text, _ := answer(t, streamItems(t, p, request(t, "op-1", h...)))
			require.Equal(t, want, text, "input %q, k=%d", c.input, k)
			h = append(h, assistant(text))
		}
		requireFailed(t, streamItems(t, p, request(t, "op-1", h...)), scripted.CodeScriptExhausted)
	}
}

func TestSelect_ANewRoundStartsOverFromItsOwnInput(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{
		{Match: "not:Reviewer feedback", Calls: []scripted.CallSpec{{Name: "fs.write"}}},
		{Match: "not:Reviewer feedback", Text: "draft"},
		{Match: "Reviewer feedback", Calls: []scripted.CallSpec{{Name: "fs.write"}}},
		{Match: "Reviewer feedback", Text: "revision"},
	}})
	// The same history continued with a second user message: only the
	// messages after it count.
	round1 := []message.Message{user("task"), assistant("", call("op-1-c1", "fs.write", "")), results("op-1-c1"), assistant("draft")}
	round2 := append(round1, user("Reviewer feedback: more"))
	_, calls := answer(t, streamItems(t, p, request(t, "op-3", round2...)))
	require.Equal(t, []string{"fs.write"}, calls)
	round2 = append(round2, assistant("", call("op-3-c1", "fs.write", "")), results("op-3-c1"))
	text, _ := answer(t, streamItems(t, p, request(t, "op-4", round2...)))
	require.Equal(t, "revision", text)

	// A fresh run whose only message is the feedback selects the same way.
	text, _ = answer(t, streamItems(t, p, request(t, "op-9", user("Reviewer feedback: more"))))
	require.Empty(t, text)
	i, ok := p.Select(request(t, "op-9", user("Reviewer feedback: more")))
	require.True(t, ok)
	require.Equal(t, 2, i)
}

func TestSelect_AToolTheRequestDoesNotOfferFailsTheOperation(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{{Calls: []scripted.CallSpec{{Name: "shell.run"}}}}})
	requireFailed(t, streamItems(t, p, request(t, "op-1", user("x"))), scripted.CodeToolNotOffered)
}

func TestStream_ZeroRequestIsAProviderError(t *testing.T) {
	p := provider(t, callThenAnswer)
	s, err := p.Stream(context.Background(), model.Request{})
	require.Nil(t, s)
	var pe *model.ProviderError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, scripted.CodeInvalidRequest, pe.Problem().Code())
	require.False(t, pe.Retryable())
}

func TestK23_StreamItemsAreExact(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{{
		Text:  "Hello brave new world",
		Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(` { "a" : 1 } `)}, {Name: "fs.read"}},
		Usage: scripted.Usage{Input: 3, Output: 4},
	}}})
	got := streamItems(t, p, request(t, "op-7", user("hi")))
	want := []model.Item{
		must(model.TextDelta("Hello ")),
		must(model.TextDelta("brave ")),
		must(model.TextDelta("new ")),
		must(model.TextDelta("world")),
		must(model.ToolCall(call("op-7-c1", "echo", `{"a":1}`))),
		must(model.ToolCall(call("op-7-c2", "fs.read", `{}`))),
		model.Completed(must(model.NewUsage(3, 4)), model.Metadata{}),
	}
	require.Equal(t, want, got)
}

func TestK23_LongTextIsSplitIntoBoundedDeltas(t *testing.T) {
	words := strings.Repeat("word ", 100)
	huge := "a" + strings.Repeat("é", bound.MaxTextPerOperation/2-1) // one word; odd offsets test rune boundaries
	for _, text := range []string{words, huge, "  leading and trailing  \n"} {
		p := provider(t, scripted.Script{Steps: []scripted.Step{{Text: text}}})
		items := streamItems(t, p, request(t, "op-1", user("hi")))
		deltas := items[:len(items)-1]
		var b strings.Builder
		for _, it := range deltas {
			require.Equal(t, model.KindTextDelta, it.Kind())
			require.LessOrEqual(t, len(it.Text()), bound.MaxTextDeltaBytes)
			b.WriteString(it.Text())
		}
		require.Equal(t, text, b.String())
		require.LessOrEqual(t, len(deltas), scripted.MaxDeltas+bound.MaxTextPerOperation/bound.MaxTextDeltaBytes)
	}
	p := provider(t, scripted.Script{Steps: []scripted.Step{{Text: words}}})
	require.Len(t, streamItems(t, p, request(t, "op-1", user("hi"))), scripted.MaxDeltas+1)
}

func TestK23_StreamsEndWithEOFAndRefuseUseAfterClose(t *testing.T) {
	p := provider(t, callThenAnswer)
	for _, k := range []int{0, 5} { // a normal and an exhausted position
		h := []message.Message{user("x")}
		for range k {
			h = append(h, assistant("a"))
		}
		s, err := p.Stream(context.Background(), request(t, "op-1", h...))
		require.NoError(t, err)
		drain(t, s)
		for range 2 {
			_, err := s.Recv()
			require.ErrorIs(t, err, scripted.ErrClosed)
		}
	}
	s, err := p.Stream(context.Background(), request(t, "op-1", user("x")))
	require.NoError(t, err)
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			break
		}
	}
	_, err = s.Recv()
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

func TestK24_RecvReturnsTheContextErrorOnceCancelled(t *testing.T) {
	p := provider(t, scripted.Script{Steps: []scripted.Step{{Text: "one two three four"}}})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := p.Stream(ctx, request(t, "op-1", user("x")))
	require.NoError(t, err)
	it, err := s.Recv()
	require.NoError(t, err)
	require.Equal(t, "one ", it.Text())
	cancel()
	for range 2 {
		_, err = s.Recv()
		require.ErrorIs(t, err, context.Canceled)
	}
	require.NoError(t, s.Close())

	dl, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	s, err = p.Stream(dl, request(t, "op-2", user("x")))
	require.NoError(t, err)
	_, err = s.Recv()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, s.Close())
}

func TestK30_SameRequestsGiveSameItems(t *testing.T) {
	w, _ := scripted.Builtin()
	a, b := provider(t, w), provider(t, w)
	h := []message.Message{user("task"), assistant("", call("op-1-c1", "fs.write", "")), results("op-1-c1")}
	for _, req := range []model.Request{request(t, "op-1", user("task")), request(t, "op-2", h...)} {
		require.Equal(t, streamItems(t, a, req), streamItems(t, a, req))
		require.Equal(t, streamItems(t, a, req), streamItems(t, b, req))
	}
}

func TestProvider_IsSafeForConcurrentUse(t *testing.T) {
	p := provider(t, callThenAnswer)
	req := request(t, "op-1", user("x"))
	want := streamItems(t, p, req)
	var wg sync.WaitGroup
	got := make([][]model.Item, 8)
	for i := range got {
		wg.Go(func() {
			s, err := p.Stream(context.Background(), req)
			if err != nil {
				return
			}
			defer s.Close()
			for {
				it, err := s.Recv()
				if err != nil {
					return
				}
				got[i] = append(got[i], it)
			}
		})
	}
	wg.Wait()
	for _, g := range got {
		require.Equal(t, want, g)
	}
}

func TestK1_ProviderCopiesItsScript(t *testing.T) {
	s := scripted.Script{Steps: []scripted.Step{{Text: "original", Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(`{"a":1}`)}}}}}
	p := provider(t, s)
	s.Steps[0].Text = "changed"
	s.Steps[0].Calls[0].Arguments[2] = 'b'
	items := streamItems(t, p, request(t, "op-1", user("x")))
	require.Equal(t, "original", items[0].Text())
	c, ok := items[1].Call()
	require.True(t, ok)
	require.Equal(t, `{"a":1}`, c.ArgumentsString())
}

func TestCallID_IsDeterministicAndAlwaysValid(t *testing.T) {
	require.Equal(t, id.Call("op-7-c1"), scripted.CallID("op-7", 0))
	long := id.Operation(strings.Repeat("o", bound.MaxIDBytes))
	a, b := scripted.CallID(long, 0), scripted.CallID(long, 1)
	require.NotEqual(t, a, b)
	require.Equal(t, a, scripted.CallID(long, 0))
	for _, c := range []id.Call{a, b} {
		require.NoError(t, id.Check("call", string(c)))
	}
	other := id.Operation(strings.Repeat("o", bound.MaxIDBytes-1) + "p")
	require.NotEqual(t, a, scripted.CallID(other, 0))
}
