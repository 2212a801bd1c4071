package model_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func requireStreamError(t *testing.T, err error, v model.Violation, item int) *model.StreamError {
	t.Helper()
	var se *model.StreamError
	require.ErrorAs(t, err, &se)
	require.Equal(t, v, se.Violation, se.Error())
	require.Equal(t, item, se.Item, se.Error())
	if v == model.Oversized {
		require.ErrorIs(t, err, bound.ErrExceeded)
	}
	return se
}

func feed(t *testing.T, a *model.Assembler, items ...model.Item) {
	t.Helper()
	for _, it := range items {
		require.NoError(t, a.Add(it))
	}
}

func TestK23_AssemblerBuildsTheResponse(t *testing.T) {
	c1, c2 := newCall(t, "c1", `{"a":1}`), newCall(t, "c2", "")
	u := must(model.NewUsage(12, 7))
	md := must(model.NewMetadata("openai", []byte(`{"system_fingerprint":"fp_1"}`)))

	var a model.Assembler
	require.False(t, a.Observed())
	feed(t, &a, textDelta(t, "Hel"), must(model.ToolCall(c1)), textDelta(t, "lo"),
		textDelta(t, ", world"), must(model.ToolCall(c2)))
	_, ok := a.Response()
	require.False(t, ok, "no response before the terminal")
	require.Equal(t, model.Kind(0), a.Terminal())
	feed(t, &a, model.Completed(u, md))
	require.NoError(t, a.End())
	require.NoError(t, a.Err())
	require.True(t, a.Observed())
	require.Equal(t, model.KindCompleted, a.Terminal())
	_, failed := a.Problem()
	require.False(t, failed)

	resp, ok := a.Response()
	require.True(t, ok)
	m := resp.Message()
	require.Equal(t, message.RoleAssistant, m.Role())
	require.Equal(t, "Hello, world", m.Text())
	require.Equal(t, []tool.Call{c1, c2}, slices.Collect(m.Calls()))
	require.Equal(t, u, resp.Usage())
	require.Equal(t, md, resp.Metadata())

	// One delta, no calls: the text is kept as given.
	var b model.Assembler
	feed(t, &b, textDelta(t, "only"), model.Completed(model.Usage{}, model.Metadata{}))
	require.NoError(t, b.End())
	resp, _ = b.Response()
	require.Equal(t, "only", resp.Message().Text())
	require.Equal(t, 1, resp.Message().Len())
	require.Equal(t, 0, resp.Message().NumCalls())

	// Calls only.
	var c model.Assembler
	feed(t, &c, must(model.ToolCall(c1)), model.Completed(u, model.Metadata{}))
	resp, _ = c.Response()
	require.Equal(t, "", resp.Message().Text())
	require.Equal(t, 1, resp.Message().NumCalls())
}

// A failed item is observed: a caller must never retry the operation as if
// the stream had produced nothing.
func TestK23_FailedItemCountsAsObserved(t *testing.T) {
	var a model.Assembler
	require.False(t, a.Observed())
	p := problem.Must("content_filter", "blocked")
	feed(t, &a, must(model.Failed(p)))
	require.True(t, a.Observed())
	require.Equal(t, model.KindFailed, a.Terminal())
	got, ok := a.Problem()
	require.True(t, ok)
	require.Equal(t, p, got)
	_, ok = a.Response()
	require.False(t, ok)
	require.NoError(t, a.End(), "a failed item is a valid terminal")

	// Even an invalid first item counts as observed.
	var b model.Assembler
	require.Error(t, b.Add(model.Item{}))
	require.True(t, b.Observed())
}

func TestK23_MalformedItemAfterTerminal(t *testing.T) {
	for name, terminal := range map[string]model.Item{
		"completed": model.Completed(model.Usage{}, model.Metadata{}),
		"failed":    failedItem(t),
	} {
		t.Run(name, func(t *testing.T) {
			var a model.Assembler
			feed(t, &a, textDelta(t, "hi"), terminal)
			err := a.Add(textDelta(t, "more"))
			se := requireStreamError(t, err, model.Malformed, 2)
			require.Contains(t, se.Error(), "after the terminal")
			requireStreamError(t, a.Add(terminal), model.Malformed, 2) // sticky
			requireStreamError(t, a.End(), model.Malformed, 2)
		})
	}
}

func TestK23_MalformedMissingTerminal(t *testing.T) {
	var a model.Assembler
	feed(t, &a, textDelta(t, "hi"), callItem(t, "c1", ""))
	se := requireStreamError(t, a.End(), model.Malformed, 2)
	require.Contains(t, se.Detail, "without a completed or failed item")
	require.Nil(t, se.Err)
	_, ok := a.Response()
	require.False(t, ok)

	var empty model.Assembler
	requireStreamError(t, empty.End(), model.Malformed, 0)
	require.False(t, empty.Observed())
}

func TestK23_MalformedZeroItem(t *testing.T) {
	var a model.Assembler
	feed(t, &a, textDelta(t, "hi"))
	se := requireStreamError(t, a.Add(model.Item{}), model.Malformed, 1)
	requireBoundError(t, se.Err, "stream.item", bound.Required)
	// The violation is sticky: a valid terminal cannot make the stream valid again.
	requireStreamError(t, a.Add(model.Completed(model.Usage{}, model.Metadata{})), model.Malformed, 1)
	requireStreamError(t, a.End(), model.Malformed, 1)
	require.Equal(t, a.Err(), a.End())
	require.Equal(t, model.Kind(0), a.Terminal())
}

func TestK23_MalformedDuplicateCallIDs(t *testing.T) {
	var a model.Assembler
	feed(t, &a, callItem(t, "c1", ""), callItem(t, "c2", ""))
	se := requireStreamError(t, a.Add(callItem(t, "c1", `{"x":1}`)), model.Malformed, 2)
	requireBoundError(t, se.Err, "stream.tool_calls[2].id", bound.Malformed)
}

func TestK23_MalformedEmptyCompletion(t *testing.T) {
	var a model.Assembler
	se := requireStreamError(t, a.Add(model.Completed(model.Usage{}, model.Metadata{})), model.Malformed, 0)
	require.Contains(t, se.Detail, "without text or tool calls")
}

func TestK23_OversizedText(t *testing.T) {
	delta := textDelta(t, strings.Repeat("a", bound.MaxTextDeltaBytes))
	n := bound.MaxTextPerOperation / bound.MaxTextDeltaBytes
	var a model.Assembler
	for range n {
		require.NoError(t, a.Add(delta))
	}
	require.NoError(t, a.Add(model.Completed(model.Usage{}, model.Metadata{})), "exactly at the limit")
	resp, _ := a.Response()
	require.Len(t, resp.Message().Text(), bound.MaxTextPerOperation, "never truncated")

	var b model.Assembler
	for range n {
		require.NoError(t, b.Add(delta))
	}
	se := requireStreamError(t, b.Add(textDelta(t, "a")), model.Oversized, n)
	be := requireBoundError(t, se.Err, "stream.text", bound.TooLarge)
	require.Equal(t, bound.MaxTextPerOperation+1, be.Got)
	require.Equal(t, bound.MaxTextPerOperation, be.Limit)
}

func TestK23_OversizedToolCalls(t *testing.T) {
	var a model.Assembler
	for i := range bound.MaxToolCallsPerOperation {
		require.NoError(t, a.Add(callItem(t, "c"+strconv.Itoa(i), "")))
	}
	se := requireStreamError(t, a.Add(callItem(t, "extra", "")), model.Oversized, bound.MaxToolCallsPerOperation)
	be := requireBoundError(t, se.Err, "stream.tool_calls", bound.TooMany)
	require.Equal(t, bound.MaxToolCallsPerOperation+1, be.Got)

	var b model.Assembler
	for i := range bound.MaxToolCallsPerOperation {
		require.NoError(t, b.Add(callItem(t, "c"+strconv.Itoa(i), "")))
	}
	require.NoError(t, b.Add(model.Completed(model.Usage{}, model.Metadata{})))
	resp, _ := b.Response()
	require.Equal(t, bound.MaxToolCallsPerOperation, resp.Message().NumCalls())
}

// Text and call arguments together must fit in one assistant message.
func TestK23_OversizedMessage(t *testing.T) {
	args := `{"k":"` + strings.Repeat("v", bound.MaxToolArgumentsBytes-1000) + `"}`
	perMessage := bound.MaxMessageBytes / len(args) // calls that fit
	var a model.Assembler
	for i := range perMessage {
		require.NoError(t, a.Add(callItem(t, "c"+strconv.Itoa(i), args)))
	}
	room := bound.MaxMessageBytes - perMessage*len(args)
	require.NoError(t, a.Add(textDelta(t, strings.Repeat("t", room))))
	se := requireStreamError(t, a.Add(textDelta(t, "t")), model.Oversized, perMessage+1)
	requireBoundError(t, se.Err, "stream.message", bound.TooLarge)

	var b model.Assembler
	n := 0
	for left := bound.MaxMessageBytes - len(args) + 1; left > 0; left -= bound.MaxTextDeltaBytes {
		require.NoError(t, b.Add(textDelta(t, strings.Repeat("t", min(left, bound.MaxTextDeltaBytes)))))
		n++
	}
	se = requireStreamError(t, b.Add(callItem(t, "c1", args)), model.Oversized, n)
	requireBoundError(t, se.Err, "stream.message", bound.TooLarge)
}

func TestK23_StreamErrorText(t *testing.T) {
	var a model.Assembler
	err := a.Add(model.Item{})
	require.Equal(t, "model stream: malformed at item 0: zero item: stream.item: required", err.Error())
	require.True(t, errors.Is(err, bound.ErrInvalid))
	require.Equal(t, "oversized", model.Oversized.String())
	require.Equal(t, "violation(7)", model.Violation(7).String())
}

// A one-delta text stream costs one allocation: the message's parts.
func TestAssembler_OneDeltaTextStreamAllocatesOnce(t *testing.T) {
	delta, done := textDelta(t, "hello"), model.Completed(model.Usage{}, model.Metadata{})
	allocs := testing.AllocsPerRun(100, func() {
		var a model.Assembler
		if a.Add(delta) != nil || a.Add(done) != nil || a.End() != nil {
			panic("unexpected")
		}
	})
	require.LessOrEqual(t, allocs, 1.0)
}

// FuzzAssembler drives the assembler with an arbitrary script: it must
// never panic, every error must be a *StreamError, and a completed stream's
// message must hold exactly the text and calls that were fed.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0, 5, 1, 1, 2})
	f.Add([]byte{3, 0, 1})
	f.Add([]byte{1, 1, 1, 1, 2})
	f.Add([]byte{4})
	f.Add([]byte{0, 64, 0, 64, 0, 64, 0, 64, 0, 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 256 {
			return
		}
		var (
			a     model.Assembler
			text  strings.Builder
			calls []tool.Call
			fed   int
			first error
		)
		add := func(it model.Item) {
			fed++
			err := a.Add(it)
			if err != nil {
				var se *model.StreamError
				require.ErrorAs(t, err, &se)
				require.Contains(t, []model.Violation{model.Malformed, model.Oversized}, se.Violation)
				if first == nil {
					first = err
				}
				require.Same(t, first, err, "violations are sticky")
				return
			}
			if it.Kind() == model.KindTextDelta {
				text.WriteString(it.Text())
			}
			if c, ok := it.Call(); ok {
				calls = append(calls, c)
			}
		}
		for i := 0; i < len(script); i++ {
			arg := byte(0)
			if i+1 < len(script) {
				arg = script[i+1]
			}
			switch script[i] % 5 {
			case 0:
				n := max(1, int(arg%65)*1024)
				add(must(model.TextDelta(strings.Repeat("x", min(n, bound.MaxTextDeltaBytes)))))
				i++
			case 1:
				add(must(model.ToolCall(must(tool.NewCall(callID(arg%40), "t", nil)))))
				i++
			case 2:
				add(model.Completed(model.Usage{}, model.Metadata{}))
			case 3:
				add(must(model.Failed(problem.Must("x", ""))))
			case 4:
				add(model.Item{})
			}
		}
		err := a.End()
		require.Equal(t, fed > 0, a.Observed())
		if err != nil {
			var se *model.StreamError
			require.ErrorAs(t, err, &se)
			if first != nil {
				require.Same(t, first, err)
			}
			return
		}
		require.NoError(t, first)
		require.NotEqual(t, model.Kind(0), a.Terminal())
		if resp, ok := a.Response(); ok {
			require.Equal(t, text.String(), resp.Message().Text())
			require.Equal(t, calls, slices.Collect(resp.Message().Calls()))
		}
	})
}

func callID(n byte) id.Call { return id.Call("c" + strconv.Itoa(int(n))) }

func BenchmarkAssembleTextStream(b *testing.B) {
	done := model.Completed(must(model.NewUsage(10, 20)), model.Metadata{})
	for _, n := range []int{1, 8} {
		deltas := make([]model.Item, n)
		for i := range deltas {
			deltas[i] = must(model.TextDelta("token " + strconv.Itoa(i) + " "))
		}
		b.Run(strconv.Itoa(n)+"deltas", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var a model.Assembler
				for _, d := range deltas {
					if err := a.Add(d); err != nil {
						b.Fatal(err)
					}
				}
				if err := a.Add(done); err != nil {
					b.Fatal(err)
				}
				if err := a.End(); err != nil {
					b.Fatal(err)
				}
				if _, ok := a.Response(); !ok {
					b.Fatal("no response")
				}
			}
		})
	}
}
