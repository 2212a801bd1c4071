package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace receiver on loopback: it keeps every
// span it is sent and answers /v1/metrics with success too.
type collector struct {
	srv       *httptest.Server
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*resourcepb.Resource
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/v1/traces" {
			var req coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				http.Error(w, "bad protobuf", http.StatusBadRequest)
				return
			}
			c.mu.Lock()
			for _, rs := range req.ResourceSpans {
				c.resources = append(c.resources, rs.Resource)
				for _, ss := range rs.ScopeSpans {
					c.spans = append(c.spans, ss.Spans...)
				}
			}
			c.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.srv.Close)
	require.True(t, strings.HasPrefix(c.srv.URL, "http://127.0.0.1:"))
	return c
}

// take returns and forgets the spans received, ordered by span ID.
func (c *collector) take() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.spans
	c.spans = nil
	slices.SortFunc(out, func(a, b *tracepb.Span) int { return strings.Compare(string(a.SpanId), string(b.SpanId)) })
	return out
}

// TestD3_RunOTelSendsOneTraceAndExportTraceSendsItAgain runs the built-in
// pair with --otel against a real OTLP/HTTP receiver on loopback, then
// exports the recorded pair with `runs export-trace`: the receiver gets
// the same 19 spans both times, equal field for field, and --out writes
// them as OTLP JSON.
func TestD3_RunOTelSendsOneTraceAndExportTraceSendsItAgain(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	e := env(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+c.srv.URL, "OTEL_SERVICE_NAME=spice-orch-test")
	r := spiceOrch(t, e, "run", "--json", "--otel", "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	pairID := checkBuiltinPair(t, r.stdout)
	live := c.take()
	require.Len(t, live, 19)
	names := map[string]int{}
	for _, s := range live {
		names[s.Name]++
		require.Equal(t, live[0].TraceId, s.TraceId)
	}
	require.Equal(t, map[string]int{"invoke_workflow review_loop": 1, "invoke_agent writer": 2, "invoke_agent reviewer": 2,
		"chat scripted-1": 8, "execute_tool fs.write": 2, "execute_tool fs.read": 2, "execute_tool text.stats": 2}, names)

	// Without --provider: the store's trace record names the providers.
	x := spiceOrch(t, e, "runs", "export-trace", pairID, "--store", db)
	require.Equal(t, 0, x.code, x.stderr)
	replayed := c.take()
	require.Len(t, replayed, len(live))
	for i := range live {
		require.True(t, proto.Equal(withoutLiveOnly(live[i]), replayed[i]), "span %s differs", live[i].Name)
	}

	out := filepath.Join(t.TempDir(), "trace.json")
	f := spiceOrch(t, e, "runs", "export-trace", pairID, "--store", db, "--out", out)
	require.Equal(t, 0, f.code, f.stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					TraceID string `json:"traceId"`
					Name    string `json:"name"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	spans := doc.ResourceSpans[0].ScopeSpans[0].Spans
	require.Len(t, spans, 19)
	require.Equal(t, "invoke_workflow review_loop", spans[len(spans)-1].Name)

	missing := spiceOrch(t, e, "runs", "export-trace", "pair-nope", "--store", db)
	require.Equal(t, 1, missing.code)
	require.Contains(t, missing.stderr, "pair-nope: not found")
}

// TestD3_BadOTelSettingsAreUsageErrors: an exporter this build does not
// have is exit 2 before the pair runs; without --otel the environment is
// never read.
func TestD3_BadOTelSettingsAreUsageErrors(t *testing.T) {
	t.Parallel()
	e := env(t, "OTEL_TRACES_EXPORTER=zipkin")
	r := spiceOrch(t, e, "run", "--json", "--no-store", "--otel")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "otel_traces_exporter")
	require.Empty(t, r.stdout)
	ok := spiceOrch(t, e, "run", "--json", "--no-store")
	require.Equal(t, 0, ok.code, ok.stderr)
}

// liveOnly are the attributes only a live trace has: what the providers
// and responses said of themselves is not in the store.
var liveOnly = map[string]bool{
	"gen_ai.tool.description": true, "gen_ai.response.id": true, "gen_ai.response.model": true,
	"gen_ai.response.finish_reasons": true, "server.address": true, "server.port": true,
	"gen_ai.request.temperature": true, "gen_ai.request.max_tokens": true,
}

// withoutLiveOnly returns a copy of s without the liveOnly attributes.
func withoutLiveOnly(s *tracepb.Span) *tracepb.Span {
	c := proto.Clone(s).(*tracepb.Span)
	c.Attributes = slices.DeleteFunc(c.Attributes, func(kv *commonpb.KeyValue) bool { return liveOnly[kv.Key] })
	return c
}
