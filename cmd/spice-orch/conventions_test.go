package main

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// otlpAttrs reads OTLP attributes as text: strings as they are, the rest
// as their protobuf text.
func otlpAttrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch x := v.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = strconv.FormatBool(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range x.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			out[kv.Key] = "[" + strings.Join(parts, ",") + "]"
		}
	}
	return out
}

// requireConventions checks what every trace of a pair must carry, as a
// receiver decoded it from OTLP: the Required resource attributes, the
// provider on every agent and chat span, the conversation on chat and
// tool spans, streaming chat spans, agents stable per worker, and the
// pair span without usage.
func requireConventions(t *testing.T, c *collector, spans []*tracepb.Span, pairID, provider string) {
	t.Helper()
	c.mu.Lock()
	require.NotEmpty(t, c.resources)
	for _, r := range c.resources {
		a := otlpAttrs(r.Attributes)
		require.Equal(t, "opentelemetry", a["telemetry.sdk.name"])
		require.Equal(t, "go", a["telemetry.sdk.language"])
		require.NotEmpty(t, a["telemetry.sdk.version"])
		require.NotEmpty(t, a["service.name"])
	}
	c.resources = nil
	c.mu.Unlock()
	for _, s := range spans {
		a := otlpAttrs(s.Attributes)
		switch op := a["gen_ai.operation.name"]; op {
		case "invoke_workflow":
			require.Equal(t, pairID, a["gen_ai.conversation.id"])
			require.NotContains(t, a, "gen_ai.usage.input_tokens", "the pair span repeats no usage")
			require.NotContains(t, a, "gen_ai.usage.output_tokens")
			require.NotEmpty(t, a["spice_orch.pair.input_tokens"])
		case "invoke_agent":
			require.Equal(t, provider, a["gen_ai.provider.name"], s.Name)
			require.Equal(t, pairID+"/"+a["gen_ai.agent.name"], a["gen_ai.agent.id"], "one agent per worker")
			require.Equal(t, pairID, a["gen_ai.conversation.id"])
		case "chat":
			require.Equal(t, provider, a["gen_ai.provider.name"], s.Name)
			require.Equal(t, pairID, a["gen_ai.conversation.id"])
			require.Equal(t, "true", a["gen_ai.request.stream"])
			require.NotEmpty(t, a["gen_ai.request.model"])
		case "execute_tool":
			require.Equal(t, pairID, a["gen_ai.conversation.id"], s.Name)
			require.NotEmpty(t, a["gen_ai.tool.description"], s.Name)
		default:
			t.Fatalf("span %s has operation %q", s.Name, op)
		}
	}
}

// TestD3_TracesOfBothPairsFollowTheGenAIConventionsOverOTLP runs the
// built-in pair and the OpenAI example pair (against a loopback
// OpenAI-compatible server) with --otel against a loopback OTLP/HTTP
// receiver, and checks the attributes the receiver decoded: the OpenAI
// pair's chat spans also carry the server, the request parameters and
// what each response said of itself.
func TestD3_TracesOfBothPairsFollowTheGenAIConventionsOverOTLP(t *testing.T) {
	t.Parallel()
	c := newCollector(t)

	db := filepath.Join(t.TempDir(), "runs.db")
	e := env(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.srv.URL)
	r := spiceOrch(t, e, "run", "--json", "--otel", "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	pairID := checkBuiltinPair(t, r.stdout)
	builtin := c.take()
	require.Len(t, builtin, 19)
	requireConventions(t, c, builtin, pairID, "spice_orch.scripted")

	srv := newChatServer(t)
	u, err := url.Parse(srv.srv.URL)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	e = env(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.srv.URL, "OPENAI_BASE_URL="+srv.srv.URL+"/v1", "OPENAI_API_KEY="+testKey)
	r = spiceOrch(t, e, "run", "../../examples/openai-pair.yaml", "--json", "--otel", "--workspace", t.TempDir(), "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	pairID = field[string](t, timeline(t, r.stdout)[0].Payload, "pair_id")
	spans := c.take()
	requireConventions(t, c, spans, pairID, "openai")
	var chats []string
	for _, s := range spans {
		a := otlpAttrs(s.Attributes)
		if a["gen_ai.operation.name"] != "chat" {
			continue
		}
		require.Equal(t, host, a["server.address"])
		require.Equal(t, port, a["server.port"])
		require.Equal(t, "gpt-4o-mini", a["gen_ai.request.model"])
		require.Equal(t, "gpt-4o-mini-2024-07-18", a["gen_ai.response.model"])
		chats = append(chats, a["gen_ai.response.id"]+" "+a["gen_ai.response.finish_reasons"]+" "+
			a["gen_ai.request.temperature"]+" "+a["gen_ai.request.max_tokens"])
		require.NotContains(t, s.Status.GetMessage(), "SECRET")
	}
	require.ElementsMatch(t, []string{
		"chatcmpl-E1write [tool_calls] 0.3 800", "chatcmpl-E2answer [stop] 0.3 800",
		"chatcmpl-R1read [tool_calls] 0 400", "chatcmpl-R2ok [stop] 0 400",
	}, chats)
	for _, s := range spans {
		for _, kv := range s.Attributes {
			require.NotContains(t, kv.Value.String(), "SECRET")
		}
	}
}

// TestD3_AnUnreachableCollectorIsSaidInSpiceOrchsWords: with the collector
// gone, the pair still succeeds, and stderr has spice-orch's one line
// saying the trace was not sent, not the SDK's log line.
func TestD3_AnUnreachableCollectorIsSaidInSpiceOrchsWords(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	e := env(t, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr, "OTEL_EXPORTER_OTLP_TIMEOUT=2000")
	r := spiceOrch(t, e, "run", "--json", "--otel", "--no-store")
	require.Equal(t, 0, r.code, r.stderr)
	checkBuiltinPair(t, r.stdout)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	require.Len(t, lines, 1, r.stderr)
	require.True(t, strings.HasPrefix(lines[0], "spice-orch: telemetry: not all of it was sent: "), r.stderr)
}
