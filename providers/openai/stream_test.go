package openai_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
)

// streamOf sends the standard request to a replay of handlers and drains
// the stream.
func streamOf(t *testing.T, r *replay) ([]model.Item, error) {
	t.Helper()
	p, _ := r.provider(t)
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	return drain(t, s)
}

func TestTextAnswer(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	items, err := streamOf(t, r)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Hello"), text(","), text(" world"), text("!"),
		completed(19, 4, `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","model":"gpt-4o-mini-2024-07-18","finish_reason":"stop"}`),
	}, items)
	require.Equal(t, 1, r.count())
}

func TestUsageChunk(t *testing.T) {
	// Ollama: usage arrives in its own chunk with no choices, after the
	// finish reason.
	items, err := streamOf(t, newReplay(t, transcript(t, "usage_ollama.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		// "s" may begin the key: it waits for the next chunk.
		text("Pari"), text("s."),
		completed(26, 2, `{"id":"chatcmpl-512","model":"llama3.1:8b","finish_reason":"stop"}`),
	}, items)
	require.Equal(t, int64(28), items[2].Usage().Total())
}

func TestTextWithoutUsage(t *testing.T) {
	// A server that ignores stream_options and sends keep-alive comments:
	// the answer completes with zero usage.
	items, err := streamOf(t, newReplay(t, transcript(t, "text_no_usage.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Hi"), text(" there"),
		completed(0, 0, `{"id":"cmpl-8c1b6f0e2a5d4a33","model":"meta-llama/Llama-3.1-8B-Instruct","finish_reason":"stop"}`),
	}, items)
	require.True(t, items[2].Usage().IsZero())
}

func TestToolCallFragments(t *testing.T) {
	// The arguments arrive in six fragments; the call is emitted once,
	// whole, when the model finishes.
	items, err := streamOf(t, newReplay(t, transcript(t, "tool_call_fragments.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		call("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", `{"location":"Paris, France"}`),
		completed(81, 17, `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","model":"gpt-4o-mini-2024-07-18","finish_reason":"tool_calls"}`),
	}, items)
}

func TestTwoToolCallsInOneTurn(t *testing.T) {
	// Text, then two calls by index; "fs_read" on the wire is the
	// kernel's "fs.read".
	items, err := streamOf(t, newReplay(t, transcript(t, "two_tool_calls.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Let me check both."),
		call("call_12345xyz", "get_weather", `{"location":"Paris"}`),
		call("call_67890abc", "fs.read", `{"path":"notes.txt"}`),
		completed(102, 41, `{"id":"chatcmpl-B9MJzQ6fNNjG1vLr9zTXc5u4WQw8A","model":"gpt-4o-mini-2024-07-18","finish_reason":"tool_calls"}`),
	}, items)
}

func TestToolCallWithoutIDGetsOperationID(t *testing.T) {
	// llama.cpp-style: no call ID and the whole call in one chunk.
	items, err := streamOf(t, newReplay(t, transcript(t, "tool_call_no_id.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		call("op-1-call-1", "get_weather", `{"location":"Oslo"}`),
		completed(0, 0, `{"id":"chatcmpl-Lq2","model":"qwen2.5-7b-instruct","finish_reason":"tool_calls"}`),
	}, items)
}

func TestToolCallsNumberedZeroAreSeparated(t *testing.T) {
	// Some servers give every call index 0; a new ID starts a new call.
	r := newReplay(t, sseBody(
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"get_weather","arguments":"{\"location\":\"A\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c2","function":{"name":"get_weather","arguments":"{\"location\":\"B\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`))
	items, err := streamOf(t, r)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		call("c1", "get_weather", `{"location":"A"}`),
		call("c2", "get_weather", `{"location":"B"}`),
		completed(0, 0, `{"finish_reason":"tool_calls"}`),
	}, items)
}

func TestMalformedChunkFailsTheStream(t *testing.T) {
	r := newReplay(t, transcript(t, "malformed_chunk.http"))
	items, err := streamOf(t, r)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Hel"),
		failed("malformed_chunk", "a stream chunk is not a valid chunk"),
	}, items)
	require.Equal(t, 1, r.count(), "a stream failure is never retried")
}

func TestWrongFieldTypeFailsTheStream(t *testing.T) {
	items, err := streamOf(t, newReplay(t, sseBody(
		`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"choices":"not a list"}`)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Hi"),
		failed("malformed_chunk", "a stream chunk has a field of the wrong type"),
	}, items)
}

func TestErrorAfterSomeChunks(t *testing.T) {
	r := newReplay(t, transcript(t, "error_after_chunks.http"), transcript(t, "text.http"))
	items, err := streamOf(t, r)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("The answer"), text(" i"), text("s"),
		failed("upstream_error", "the server answered with an error event (server_error): "+
			"The server had an error while processing your request. Sorry about that!"),
	}, items)
	require.Equal(t, 1, r.count(), "a stream that produced items is never retried")
}

func TestTruncatedStreamFails(t *testing.T) {
	items, err := streamOf(t, newReplay(t, transcript(t, "truncated.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("Half an an"), text("s"),
		failed("stream_truncated", "the stream ended before the model finished"),
	}, items)
}

func TestContentFilteredWithoutOutputFails(t *testing.T) {
	items, err := streamOf(t, newReplay(t, transcript(t, "content_filter.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		failed("content_filtered", "the model finished without output because of a content filter"),
	}, items)
}

func TestInvalidToolArgumentsFail(t *testing.T) {
	// The model ran out of tokens inside the arguments.
	items, err := streamOf(t, newReplay(t, transcript(t, "invalid_tool_args.http")))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		failed("invalid_tool_call", "a tool call is invalid: tool_call.arguments: malformed: "+
			"not valid UTF-8 JSON (the model reached its output token limit)"),
	}, items)
}

func TestRefusalIsTextAndFlagged(t *testing.T) {
	items, err := streamOf(t, newReplay(t, sseBody(
		`{"id":"r1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`,
		`{"id":"r1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("I can't help with that."),
		completed(0, 0, `{"id":"r1","finish_reason":"stop","refusal":true}`),
	}, items)
}

func TestContentAfterFinishFails(t *testing.T) {
	items, err := streamOf(t, newReplay(t, sseBody(
		`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"delta":{"content":"b"}}]}`)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("a"),
		failed("malformed_chunk", "content arrived after the finish reason"),
	}, items)
}

func TestOtherChoicesAreIgnored(t *testing.T) {
	items, err := streamOf(t, newReplay(t, sseBody(
		`{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{text("mine"), completed(0, 0, `{"finish_reason":"stop"}`)}, items)
}

func TestMetadataWithCredentialShapeIsDropped(t *testing.T) {
	// model.NewMetadata refuses credential-like values; the answer still
	// completes, without metadata.
	items, err := streamOf(t, newReplay(t, sseBody(
		`{"id":"sk-abcdefghijklmnopqrstuvwxyz012345","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`,
		`[DONE]`)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{text("x"), completed(0, 0, "")}, items)
}
