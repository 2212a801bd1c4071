package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/openai"
)

func contentChunk(s string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": s}}}})
	return string(b)
}

func argsChunk(index int, callID, name, args string) string {
	tc := map[string]any{"index": index, "function": map[string]any{"name": name, "arguments": args}}
	if callID != "" {
		tc["id"] = callID
	}
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}}}})
	return string(b)
}

const finishStop = `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// textOf sums the text the items carry.
func textOf(items []model.Item) int {
	n := 0
	for _, it := range items {
		n += len(it.Text())
	}
	return n
}

func TestK2_OversizedTextFailsWithoutTruncation(t *testing.T) {
	// Five chunks of 60 KiB: the fifth would pass bound.MaxTextPerOperation.
	piece := strings.Repeat("a", 60<<10)
	events := []string{}
	for range 5 {
		events = append(events, contentChunk(piece))
	}
	events = append(events, finishStop, "[DONE]")
	items, err := streamOf(t, newReplay(t, sseBody(events...)))
	require.NoError(t, err)
	require.Len(t, items, 5)
	require.Equal(t, 4*len(piece), textOf(items), "whole chunks only: nothing was cut")
	last := items[len(items)-1]
	require.Equal(t, model.KindFailed, last.Kind())
	p, _ := last.Problem()
	require.Equal(t, "stream_oversized", p.Code())
	require.Equal(t, fmt.Sprintf("the stream exceeds a kernel bound: stream.text: too large (%d > limit %d)",
		5*len(piece), bound.MaxTextPerOperation), p.Message())
}

func TestK2_LargeDeltaIsSplitAtRuneBoundaries(t *testing.T) {
	// One chunk of 100 KiB of 3-byte runes is above bound.MaxTextDeltaBytes:
	// it is split, never cut, and every piece is valid UTF-8.
	big := strings.Repeat("€", (100<<10)/3)
	items, err := streamOf(t, newReplay(t, sseBody(contentChunk(big), finishStop, "[DONE]")))
	require.NoError(t, err)
	require.Len(t, items, 3)
	require.LessOrEqual(t, len(items[0].Text()), bound.MaxTextDeltaBytes)
	require.Equal(t, big, items[0].Text()+items[1].Text())
	require.Equal(t, model.KindCompleted, items[2].Kind())
}

func TestK2_TooManyToolCallsFail(t *testing.T) {
	events := []string{}
	for i := range bound.MaxToolCallsPerOperation + 1 {
		events = append(events, argsChunk(i, fmt.Sprintf("c%d", i), "get_weather", `{}`))
	}
	events = append(events, `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, "[DONE]")
	items, err := streamOf(t, newReplay(t, sseBody(events...)))
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		failed("stream_oversized", fmt.Sprintf("the stream exceeds a kernel bound: stream.tool_calls: too many (%d > limit %d)",
			bound.MaxToolCallsPerOperation+1, bound.MaxToolCallsPerOperation)),
	}, items)
}

func TestK2_OversizedArgumentsFailWhileArriving(t *testing.T) {
	// 17 fragments of 4 KiB: the call fails at the fragment that passes
	// bound.MaxToolArgumentsBytes, before the finish.
	frag := strings.Repeat("x", 4<<10)
	events := []string{argsChunk(0, "c1", "get_weather", `{"location":"`)}
	for range 17 {
		events = append(events, argsChunk(0, "", "", frag))
	}
	items, err := streamOf(t, newReplay(t, sseBody(events...)))
	require.NoError(t, err)
	require.Len(t, items, 1)
	p, ok := items[0].Problem()
	require.True(t, ok)
	require.Equal(t, "stream_oversized", p.Code())
	require.Contains(t, p.Message(), "tool_call.arguments: too large")
}

func TestK2_TextPlusArgumentsBoundTheMessage(t *testing.T) {
	// 200 KiB of text plus 60 KiB of arguments exceed bound.MaxMessageBytes.
	text := strings.Repeat("t", 50<<10)
	args := `{"a":"` + strings.Repeat("y", 60<<10) + `"}`
	events := []string{contentChunk(text), contentChunk(text), contentChunk(text), contentChunk(text),
		argsChunk(0, "c1", "get_weather", args)}
	items, err := streamOf(t, newReplay(t, sseBody(events...)))
	require.NoError(t, err)
	last := items[len(items)-1]
	p, ok := last.Problem()
	require.True(t, ok)
	require.Equal(t, "stream_oversized", p.Code())
	require.Contains(t, p.Message(), "stream.message: too large")
}

func TestResponseByteLimitFailsTheStream(t *testing.T) {
	r := newReplay(t, sseBody(contentChunk("first"), contentChunk(strings.Repeat("z", 4096)), finishStop, "[DONE]"))
	p, _ := r.provider(t, func(c *openai.Config) { c.MaxResponseBytes = 1024 })
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	require.Equal(t, []model.Item{
		text("first"),
		failed("response_too_large", "the response exceeds the byte limit"),
	}, items)
}

func TestResponseByteLimitBeforeFirstChunk(t *testing.T) {
	r := newReplay(t, sseBody(contentChunk(strings.Repeat("z", 4096))))
	p, _ := r.provider(t, func(c *openai.Config) { c.MaxResponseBytes = 1024 })
	_, err := p.Stream(context.Background(), request(t))
	pe := providerError(t, err)
	require.Equal(t, "response_too_large", pe.Problem().Code())
	require.False(t, pe.Retryable())
}
