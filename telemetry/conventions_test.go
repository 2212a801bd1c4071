package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/telemetry"
)

// described is a provider that says what an OpenAI-compatible provider
// says of itself: its name, its server and its request parameters.
type described struct{ model.Provider }

func (described) ProviderName() string                  { return "openai" }
func (described) ServerAddress() (string, int)          { return "127.0.0.1", 8080 }
func (described) RequestParams() (float64, bool, int64) { return 0.25, true, 256 }

func completedWith(t testing.TB, in, out int64, md string) model.Item {
	t.Helper()
	u, err := model.NewUsage(in, out)
	require.NoError(t, err)
	m, err := model.NewMetadata("openai", []byte(md))
	require.NoError(t, err)
	return model.Completed(u, m)
}

// TestD3_TheProviderNamesItselfForALibraryHost draws a pair of a host that
// fills no Config.Providers: with Instrument the provider's own name is on
// every agent and chat span and in the metrics; without it the required
// attribute still is there, as ProviderUnknown.
func TestD3_TheProviderNamesItselfForALibraryHost(t *testing.T) {
	for _, instrument := range []bool{true, false} {
		tr := newTracing(t)
		m := newMetrics(t)
		tel := tr.telemetry(t, telemetry.Config{MeterProvider: m.mp})
		cfg := builtinPair(t, nil)
		want := "spice_orch.scripted"
		if instrument {
			tel.Instrument(&cfg)
		} else {
			want = telemetry.ProviderUnknown
			cfg.Timeline = orchestrator.TimelineConfig{BestEffort: []eventlog.Observer{tel}, Mailbox: telemetry.Mailbox}
		}
		_, _, err := play(t, context.Background(), cfg)
		require.NoError(t, err)
		n := 0
		for _, s := range tr.exp.GetSpans() {
			if strings.HasPrefix(s.Name, "invoke_agent") || strings.HasPrefix(s.Name, "chat") {
				require.Equal(t, want, attr(s, "gen_ai.provider.name"), s.Name)
				n++
			}
		}
		require.Equal(t, 12, n)
		require.Contains(t, strings.Join(m.points(t), "\n"), "gen_ai.provider.name="+want+",")
	}
}

// TestD3_ChatSpansCarryWhatTheProviderAndResponseSay draws a relay whose
// writer's provider describes itself and whose response carries provider
// metadata: the chat span gets the server, the request parameters and the
// response's model, ID and finish reason; the execute_tool span the tool's
// description; the duration metric the server.
func TestD3_ChatSpansCarryWhatTheProviderAndResponseSay(t *testing.T) {
	tr := newTracing(t)
	m := newMetrics(t)
	tel := tr.telemetry(t, telemetry.Config{MeterProvider: m.mp})
	first := [][]model.Item{
		{enginetest.Call("c1", "echo", `{"text":"hi"}`),
			completedWith(t, 12, 3, `{"id":"chatcmpl-1","model":"gpt-test-0613","finish_reason":"tool_calls"}`)},
		{enginetest.Text("Done."), completedWith(t, 20, 2, `{"id":"chatcmpl-2","model":"gpt-test-0613","finish_reason":"stop"}`)},
	}
	cfg := scriptedPair(t, nil, orchestrator.Relay, first, [][]model.Item{enginetest.Answer("Noted.")}, enginetest.Echo())
	cfg.First.Engine.Provider = described{cfg.First.Engine.Provider}
	tel.Instrument(&cfg)
	_, _, err := play(t, context.Background(), cfg)
	require.NoError(t, err)
	spans := tr.exp.GetSpans()
	chats := named(spans, "chat scripted-1")
	require.Len(t, chats, 3)
	keys := []string{"gen_ai.provider.name", "server.address", "server.port", "gen_ai.request.temperature",
		"gen_ai.request.max_tokens", "gen_ai.request.stream", "gen_ai.response.id", "gen_ai.response.model",
		"gen_ai.response.finish_reasons"}
	require.Equal(t, []string{"gen_ai.provider.name=openai", "server.address=127.0.0.1", "server.port=8080",
		"gen_ai.request.temperature=0.25", "gen_ai.request.max_tokens=256", "gen_ai.request.stream=true",
		"gen_ai.response.id=chatcmpl-1", "gen_ai.response.model=gpt-test-0613", `gen_ai.response.finish_reasons=["tool_calls"]`,
	}, attrs(chats[0], keys...))
	require.Equal(t, "chatcmpl-2", attr(chats[1], "gen_ai.response.id"))
	require.Equal(t, `["stop"]`, attr(chats[1], "gen_ai.response.finish_reasons"))
	// The reviewer's provider says nothing of itself.
	require.Equal(t, []string{"gen_ai.provider.name=" + telemetry.ProviderUnknown, "server.address=", "server.port=",
		"gen_ai.request.temperature=", "gen_ai.request.max_tokens=", "gen_ai.request.stream=true",
		"gen_ai.response.id=", "gen_ai.response.model=", "gen_ai.response.finish_reasons=",
	}, attrs(chats[2], keys...))
	echo := named(spans, "execute_tool echo")[0]
	require.Equal(t, enginetest.Echo().Def.Description(), attr(echo, "gen_ai.tool.description"))
	require.NotEmpty(t, attr(echo, "gen_ai.tool.description"))
	require.Contains(t, strings.Join(m.points(t), "\n"),
		"gen_ai.client.operation.duration{gen_ai.operation.name=chat,gen_ai.provider.name=openai,gen_ai.request.model=scripted-1,server.address=127.0.0.1,server.port=8080} count=2")
}

// TestD3_AModelServersErrorTextIsContent fails a model operation with a
// message that quotes the prompt: the span status says it only with
// RecordContent, and the error type always.
func TestD3_AModelServersErrorTextIsContent(t *testing.T) {
	for _, content := range []bool{false, true} {
		tr := newTracing(t)
		tel := tr.telemetry(t, telemetry.Config{RecordContent: content})
		first := [][]model.Item{{enginetest.Fail("upstream_error", "the server refused: Say hello.")}}
		_, _, err := play(t, context.Background(), scriptedPair(t, tel, orchestrator.Relay, first, nil))
		require.Error(t, err)
		spans := tr.exp.GetSpans()
		want := "upstream_error"
		if content {
			want = "the server refused: Say hello."
		}
		chat := named(spans, "chat scripted-1")[0]
		require.Equal(t, sdktrace.Status{Code: codes.Error, Description: want}, chat.Status)
		require.Equal(t, "upstream_error", attr(chat, "error.type"))
		require.Equal(t, sdktrace.Status{Code: codes.Error, Description: want}, named(spans, "invoke_agent writer")[0].Status)
	}
}

// blocking is a provider whose stream ends only with its context.
type blocking struct{}

func (blocking) Stream(ctx context.Context, _ model.Request) (model.Stream, error) {
	return blockingStream{ctx}, nil
}

type blockingStream struct{ ctx context.Context }

func (s blockingStream) Recv() (model.Item, error) { <-s.ctx.Done(); return model.Item{}, s.ctx.Err() }
func (blockingStream) Close() error                { return nil }

// TestD3_AFailedOrCancelledOperationRecordsItsDurationOnly checks the
// metrics of a model operation that did not complete: one duration point
// with its error.type, and no token usage point at all.
func TestD3_AFailedOrCancelledOperationRecordsItsDurationOnly(t *testing.T) {
	const chat = "gen_ai.client.operation.duration{error.type=%s,gen_ai.operation.name=chat,gen_ai.provider.name=spice_orch.unknown,gen_ai.request.model=scripted-1} count=1 sum=0.001"
	t.Run("failed", func(t *testing.T) {
		m := newMetrics(t)
		tel, err := telemetry.New(telemetry.Config{MeterProvider: m.mp})
		require.NoError(t, err)
		first := [][]model.Item{{enginetest.Fail("upstream_error", "the server failed")}}
		_, _, err = play(t, context.Background(), scriptedPair(t, tel, orchestrator.Relay, first, nil))
		require.Error(t, err)
		require.Equal(t, []string{
			strings.Replace(chat, "%s", "upstream_error", 1),
			"spice_orch.pairs.ended{gen_ai.workflow.name=relay,spice_orch.pair.reason=worker_failed} 1",
		}, m.points(t))
	})
	t.Run("cancelled", func(t *testing.T) {
		m := newMetrics(t)
		tel, err := telemetry.New(telemetry.Config{MeterProvider: m.mp})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := scriptedPair(t, tel, orchestrator.Relay, nil, nil)
		cfg.First.Engine.Provider = blocking{}
		cfg.Timeline.Required = []eventlog.Observer{cancelAt(event.KindModelStarted, cancel)}
		_, _, err = play(t, ctx, cfg)
		require.Error(t, err)
		require.Equal(t, []string{
			strings.Replace(chat, "%s", "cancelled", 1),
			"spice_orch.pairs.ended{gen_ai.workflow.name=relay,spice_orch.pair.reason=cancelled} 1",
		}, m.points(t))
	})
}
