package openai_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/openai"
)

func TestRequestMapping(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	temp := 0.2
	p, _ := r.provider(t, func(c *openai.Config) { c.Temperature = &temp; c.MaxOutputTokens = 256 })
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	_, err = drain(t, s)
	require.NoError(t, err)

	got := r.request(0)
	require.Equal(t, "/v1/chat/completions", got.path)
	require.Equal(t, "Bearer "+testKey, got.header.Get("Authorization"))
	require.JSONEq(t, `{
		"model": "gpt-4o-mini",
		"stream": true,
		"stream_options": {"include_usage": true},
		"temperature": 0.2,
		"max_completion_tokens": 256,
		"messages": [
			{"role": "system", "content": "You are terse."},
			{"role": "user", "content": "What is in a.txt, and the weather in Oslo?"},
			{"role": "assistant", "content": "Checking.", "tool_calls": [
				{"id": "call_a", "type": "function", "function": {"name": "fs_read", "arguments": "{\"path\":\"a.txt\"}"}},
				{"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Oslo\"}"}}
			]},
			{"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
			{"role": "tool", "tool_call_id": "call_b", "content": "error (not_found): no such city\n\ntry another"},
			{"role": "assistant", "content": "a.txt says 'contents of a'."},
			{"role": "user", "content": "Thanks. And Paris?"}
		],
		"tools": [
			{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a location.",
				"parameters": {"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}},
			{"type": "function", "function": {"name": "fs_read",
				"parameters": {"type":"object","properties":{"path":{"type":"string"}}}}}
		]
	}`, string(got.body))
	// The schema is sent byte for byte, in the definition's key order.
	require.Contains(t, string(got.body),
		`"parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)
}

func TestLegacyMaxTokensAndDefaults(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t, func(c *openai.Config) { c.MaxOutputTokens = 64; c.LegacyMaxTokens = true })
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.request(0).body, &body))
	require.Equal(t, 64.0, body["max_tokens"])
	require.NotContains(t, body, "max_completion_tokens")
	require.NotContains(t, body, "temperature", "unset temperature is not sent")
	require.NotContains(t, body, "metadata", "request metadata is never sent")
}

func TestNoKeyNoAuthorizationHeader(t *testing.T) {
	// A local server (Ollama, llama.cpp) needs no key.
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t, func(c *openai.Config) { c.APIKey = "" })
	s, err := p.Stream(context.Background(), request(t))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, r.request(0).header.Get("Authorization"))
}

func TestToolNamesThatWouldCollideAreRefused(t *testing.T) {
	a := must(tool.NewDefinition(tool.DefinitionConfig{Name: "fs.read", Effect: tool.ReadOnly, Replay: tool.Safe}))
	b := must(tool.NewDefinition(tool.DefinitionConfig{Name: "fs_read", Effect: tool.ReadOnly, Replay: tool.Safe}))
	req := must(model.NewRequest(model.RequestConfig{
		Operation: "op-1", Model: "m", Messages: []message.Message{must(message.User("hi"))},
		Tools: []tool.Definition{a, b},
	}))
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), req)
	pe := providerError(t, err)
	require.Equal(t, "invalid_request", pe.Problem().Code())
	require.False(t, pe.Retryable())
	require.Equal(t, 0, r.count(), "nothing is sent")
}

func TestZeroRequestIsRefused(t *testing.T) {
	r := newReplay(t, transcript(t, "text.http"))
	p, _ := r.provider(t)
	_, err := p.Stream(context.Background(), model.Request{})
	require.Equal(t, "invalid_request", providerError(t, err).Problem().Code())
	require.Equal(t, 0, r.count())
}
