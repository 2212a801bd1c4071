package providerkit_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/proof/providerkit"
	"github.com/spice-orch/spice-orch/providers/coalesce"
	"github.com/spice-orch/spice-orch/providers/openai"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// sse serves server-sent events in the Chat Completions wire format, then
// optionally holds the stream open until the client goes away.
func sse(events []string, hold bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, e := range events {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", e)
			f.Flush()
		}
		if hold {
			<-r.Context().Done()
		}
	}
}

func chunk(delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-kit","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini",` +
		`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fr + `}],"usage":null}`
}

const usage = `{"id":"chatcmpl-kit","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-mini","choices":[],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`

// openaiSetup starts a test server with h and returns a provider aimed at
// it; the server and its client's idle connections close with the test.
func openaiSetup(h http.HandlerFunc) providerkit.Setup {
	return func(t *testing.T) model.Provider {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		p, err := openai.New(openai.Config{APIKey: "sk-test-SECRET-123", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
		require.NoError(t, err)
		return p
	}
}

func TestOpenAIConforms(t *testing.T) { openaiConforms(t, openaiSetup) }

// The OpenAI provider decorated by coalesce, as every command composes
// it, conforms too: its streams merge ready text deltas.
func TestK23_CoalescedOpenAIConforms(t *testing.T) {
	openaiConforms(t, func(h http.HandlerFunc) providerkit.Setup {
		inner := openaiSetup(h)
		return func(t *testing.T) model.Provider {
			p, err := coalesce.New(coalesce.Config{Provider: inner(t)})
			require.NoError(t, err)
			return p
		}
	})
}

func openaiConforms(t *testing.T, openaiSetup func(http.HandlerFunc) providerkit.Setup) {
	big := chunk(`{"content":"`+strings.Repeat("a", 60<<10)+`"}`, "")
	providerkit.Run(t, providerkit.Config{
		Text: openaiSetup(sse([]string{
			chunk(`{"role":"assistant","content":""}`, ""), chunk(`{"content":"Hello"}`, ""),
			chunk(`{"content":" there"}`, ""), chunk(`{}`, "stop"), usage, "[DONE]"}, false)),
		ToolCall: openaiSetup(sse([]string{
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"query\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"hello\"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"), usage, "[DONE]"}, false)),
		Slow: openaiSetup(sse([]string{chunk(`{"role":"assistant","content":"Thinking"}`, "")}, true)),
		ErrorBeforeStream: openaiSetup(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
		}),
		Oversized: openaiSetup(sse([]string{big, big, big, big, big, chunk(`{}`, "stop"), "[DONE]"}, false)),
	})
}

func scriptedSetup(s scripted.Script) providerkit.Setup {
	return func(t *testing.T) model.Provider {
		p, err := scripted.NewProvider(s)
		require.NoError(t, err)
		return p
	}
}

func TestScriptedConforms(t *testing.T) {
	// The scripted provider checks its context before every item, so its
	// text script also serves as the Slow setup. It fails before a stream
	// only for a zero request, which the kit never sends, and it cannot
	// hold more than the bounds allow: those two scenarios are skipped.
	text := scriptedSetup(scripted.Script{Steps: []scripted.Step{{Text: "Hello there, kit.", Usage: scripted.Usage{Input: 9, Output: 4}}}})
	providerkit.Run(t, providerkit.Config{
		Text: text,
		ToolCall: scriptedSetup(scripted.Script{Steps: []scripted.Step{{
			Calls: []scripted.CallSpec{{Name: providerkit.DefaultToolName, Arguments: json.RawMessage(`{"query":"hello"}`)}},
		}}}),
		Slow: text,
	})
}
