package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/openai"
)

// liveProvider returns a provider for a real server, or skips: the live
// tests run only with SPICE_ORCH_LIVE=1 and a key (or a base URL for a
// local server that needs none). SPICE_ORCH_LIVE_MODEL picks the model.
func liveProvider(t *testing.T) (*openai.Provider, string) {
	t.Helper()
	if os.Getenv("SPICE_ORCH_LIVE") != "1" {
		t.Skip("set SPICE_ORCH_LIVE=1 and OPENAI_API_KEY to run live tests")
	}
	cfg := openai.ConfigFromEnv(os.Getenv)
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		t.Skip("OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) is not set")
	}
	// A transport of its own, closed at the end, so goleak sees no idle
	// connection left behind.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	cfg.HTTPClient = &http.Client{Transport: tr}
	cfg.Timeout = 2 * time.Minute
	p, err := openai.New(cfg)
	require.NoError(t, err)
	m := os.Getenv("SPICE_ORCH_LIVE_MODEL")
	if m == "" {
		m = "gpt-4o-mini"
	}
	return p, m
}

func TestLiveTextAnswer(t *testing.T) {
	p, m := liveProvider(t)
	req := must(model.NewRequest(model.RequestConfig{
		Operation: "op-live-1", Model: m, System: "Answer with one word.",
		Messages: []message.Message{must(message.User("Reply with the word: pong"))},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := p.Stream(ctx, req)
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	last := items[len(items)-1]
	require.Equal(t, model.KindCompleted, last.Kind(), "%v", last)
	require.Positive(t, last.Usage().Input())
	t.Logf("%d items, usage %d/%d, metadata %s", len(items), last.Usage().Input(), last.Usage().Output(), last.Metadata().JSONString())
}

func TestLiveToolCall(t *testing.T) {
	p, m := liveProvider(t)
	weather := must(tool.NewDefinition(tool.DefinitionConfig{
		Name: "weather.get", Description: "Current weather for a city.",
		Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Effect: tool.ReadOnly, Replay: tool.Safe,
	}))
	req := must(model.NewRequest(model.RequestConfig{
		Operation: "op-live-2", Model: m, System: "Use the tools you have.",
		Messages: []message.Message{must(message.User("What is the weather in Paris and in Oslo? Call the tool once per city."))},
		Tools:    []tool.Definition{weather},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := p.Stream(ctx, req)
	require.NoError(t, err)
	items, err := drain(t, s)
	require.NoError(t, err)
	calls := 0
	for _, it := range items {
		if c, ok := it.Call(); ok {
			calls++
			require.Equal(t, "weather.get", c.Name(), "the wire name maps back")
			t.Logf("call %s %s", c.ID(), c.ArgumentsString())
		}
	}
	require.Positive(t, calls)
	require.Equal(t, model.KindCompleted, items[len(items)-1].Kind())
}
